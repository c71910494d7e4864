# Readiness after the peer's orderly close: poll (POLLRDHUP) and epoll (EPOLLRDHUP), level.
# sdp-conns: 2
import select
from edge import *


def names(mask, table):
    return "|".join(n for n, v in table if mask & v) or "0"


POLL = [("IN", select.POLLIN), ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
        ("HUP", select.POLLHUP), ("RDHUP", 0x2000)]
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"x")
attempt("recv", lambda: a.recv(1))
c.close()
p = select.poll()
p.register(a, select.POLLIN | 0x2000)
ev = p.poll(10000)
out("poll", [names(m, POLL) for _, m in ev])
ep = select.epoll()
ep.register(a.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
out("epoll", [names(m, [("IN", select.EPOLLIN), ("HUP", select.EPOLLHUP), ("RDHUP", select.EPOLLRDHUP),
                        ("ERR", select.EPOLLERR)]) for _, m in ep.poll(10)])
attempt("recv", lambda: a.recv(1))
done()
