# The client sends urgent data right after the server's accept, while the server makes no
# call on its socket: the send returns at once, and the server then sees it as urgent data.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
attempt("client sends", lambda: c.send(b"ab"))
attempt("client oob send", lambda: c.send(b"!", socket.MSG_OOB))
p = select.poll()
p.register(a, select.POLLPRI)
out("server POLLPRI", bool(p.poll(10000)))
attempt("server oob", lambda: a.recv(1, socket.MSG_OOB))
got = b""
while len(got) < 2:
    got += a.recv(10)
out("server got", got)
done()
