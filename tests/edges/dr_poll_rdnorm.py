# poll with POLLRDNORM and POLLWRNORM, POLLIN's and POLLOUT's other names on a TCP socket,
# alone and beside them: a poll for POLLRDNORM alone returns when data comes (it waited until
# the peer's close once) and reports it as the kernel does; select and epoll see the same.
# sdp-conns: 2
import select
from edge import *

NAMES = [("IN", select.POLLIN), ("PRI", select.POLLPRI), ("OUT", select.POLLOUT),
         ("ERR", select.POLLERR), ("HUP", select.POLLHUP), ("RDNORM", select.POLLRDNORM),
         ("RDBAND", select.POLLRDBAND), ("WRNORM", select.POLLWRNORM)]


def names(m):
    return "|".join(n for n, v in NAMES if m & v)


def poll(s, mask, timeout=0):
    p = select.poll()
    p.register(s, mask)
    return [names(m) for _, m in p.poll(timeout)]


def epoll(s, mask, timeout=0):
    e = select.epoll()
    e.register(s, mask)
    try:
        return [names(m) for _, m in e.poll(timeout)]
    finally:
        e.close()


srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
out("fresh, RDNORM", poll(a, select.POLLRDNORM))
out("fresh, WRNORM", poll(a, select.POLLWRNORM))
out("fresh, OUT|WRNORM", poll(a, select.POLLOUT | select.POLLWRNORM))
c.sendall(b"data")
out("waits for RDNORM alone", poll(a, select.POLLRDNORM, 10000))
out("IN|RDNORM|RDBAND|PRI (curl's)", poll(a, select.POLLIN | select.POLLRDNORM | select.POLLRDBAND | select.POLLPRI))
out("epoll RDNORM", epoll(a, select.EPOLLRDNORM))
out("epoll IN|RDNORM|WRNORM", epoll(a, select.EPOLLIN | select.EPOLLRDNORM | select.EPOLLWRNORM))
out("read", a.recv(10))
out("read out, RDNORM, 100 ms", poll(a, select.POLLRDNORM, 100))
c.sendall(b"more")
out("epoll waits for RDNORM alone", epoll(a, select.EPOLLRDNORM, 10))
out("read", a.recv(10))
done()
