# What getsockopt reports for SO_SNDBUF/SO_RCVBUF set before connect, and set after it.
# sdp-conns: 2
from edge import *

srv = listener()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
c = socket.socket()
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
c.connect(srv.getsockname())
a, _ = srv.accept()
out("client SO_SNDBUF", c.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
out("server SO_RCVBUF", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
out("client SO_RCVBUF after connect", c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
c.sendall(b"x")
a.settimeout(10)
attempt("server got", lambda: a.recv(1))
done()
