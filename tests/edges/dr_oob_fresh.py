# Urgent data sent early on a fresh connection (after 2 bytes the peer has not read yet):
# send(MSG_OOB) returns at once over TCP; the peer then finds the urgent byte and the data
# around it.
# sdp-conns: 2
import select
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"ab")
attempt("send MSG_OOB", lambda: c.send(b"!", socket.MSG_OOB))
c.sendall(b"cd")
p = select.poll()
p.register(a, select.POLLPRI)
out("POLLPRI", bool(p.poll(10000)))
attempt("oob", lambda: a.recv(1, socket.MSG_OOB))
attempt("recv up to the mark", lambda: a.recv(10))
attempt("recv rest", lambda: a.recv(10))
done()
