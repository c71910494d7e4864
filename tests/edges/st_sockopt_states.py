# SO_ERROR and SO_ACCEPTCONN through a connection's life: a new socket, a listener, both ends
# after a non-blocking connect, after data, after the peer's orderly close.
# sdp-conns: 2
import select
from edge import *


def show(what, s):
    e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    out(what, "SO_ERROR", errno.errorcode.get(e, e), "SO_ACCEPTCONN",
        s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))


show("new socket", socket.socket())
srv = listener()
show("listener", srv)
c = connect_nonblocking(srv.getsockname())
p = select.poll()
p.register(c, select.POLLOUT)
out("poll", [m == select.POLLOUT for _, m in p.poll(10000)])
show("client connected", c)
a, _ = srv.accept()
show("accepted", a)
for x in (a, c):
    x.setblocking(True)
    x.settimeout(10)
c.sendall(b"x")
attempt("server recv", lambda: a.recv(1))
show("client after data", c)
show("server after data", a)
c.close()
attempt("server recv", lambda: a.recv(1))
show("server after the peer closed", a)
show("listener", srv)
done()
