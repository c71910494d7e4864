# The peer sends 2 bytes and shuts down its writing side: readiness here before and after
# reading them, recv returns the bytes then 0 repeatedly, and this side still writes to the
# peer, which still reads.
# sdp-conns: 2
import select
from edge import *

POLL = [("IN", select.POLLIN), ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
        ("HUP", select.POLLHUP), ("RDHUP", 0x2000)]


def poll(s, timeout=0):
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLOUT | 0x2000)
    return ["|".join(n for n, v in POLL if m & v) for _, m in p.poll(timeout)]


def wait_rdhup(s):
    p = select.poll()
    p.register(s, 0x2000)
    return bool(p.poll(10000))


srv = listener()
c, a = accepted(srv)
c.sendall(b"ok")
c.shutdown(socket.SHUT_WR)
out("peer's end seen", wait_rdhup(a))
out("server", poll(a))
out("client", poll(c))
attempt("recv", lambda: a.recv(10))
out("server after reading", poll(a))
attempt("recv at end", lambda: a.recv(10))
attempt("recv at end again", lambda: a.recv(10))
attempt("server sends", lambda: a.send(b"answer"))
attempt("client reads", lambda: c.recv(10))
out("client after reading", poll(c))
attempt("client sends after SHUT_WR", lambda: c.send(b"x"))
done()
