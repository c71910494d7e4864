# Urgent data right after accept, before the other end has made any call on its socket: the
# server's send(MSG_OOB) reaches the client as urgent data, then the client's.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c, a = accepted(srv)
attempt("server oob send", lambda: a.send(b"!", socket.MSG_OOB))
p = select.poll()
p.register(c, select.POLLPRI)
out("client POLLPRI", bool(p.poll(10000)))
attempt("client oob send", lambda: c.send(b"?", socket.MSG_OOB))
p = select.poll()
p.register(a, select.POLLPRI)
out("server POLLPRI", bool(p.poll(10000)))
done()
