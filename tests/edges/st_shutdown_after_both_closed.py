# shutdown called again on a connection whose two ends have both shut their sending sides and
# read end of stream: the kernel has closed the connection and answers ENOTCONN.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
c.sendall(b"x")
attempt("server recv", lambda: a.recv(1))
attempt("client SHUT_WR", lambda: c.shutdown(socket.SHUT_WR))
attempt("client SHUT_WR again", lambda: c.shutdown(socket.SHUT_WR))
attempt("server recv", lambda: a.recv(1))
attempt("server SHUT_WR", lambda: a.shutdown(socket.SHUT_WR))
attempt("client recv", lambda: c.recv(1))
attempt("client SHUT_RD", lambda: c.shutdown(socket.SHUT_RD))
attempt("client SHUT_RDWR", lambda: c.shutdown(socket.SHUT_RDWR))
attempt("server SHUT_WR again", lambda: a.shutdown(socket.SHUT_WR))
attempt("server SHUT_RDWR", lambda: a.shutdown(socket.SHUT_RDWR))
done()
