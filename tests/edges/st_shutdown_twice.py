# shutdown called more than once while the connection is half open: SHUT_WR twice, SHUT_RD
# twice at the end that read end of stream, SHUT_RD at the end that shut first; data still
# flows the open way. Then the other end shuts its sending side too, and shutdown again on
# either end finds the connection closed (both ends' FINs passed: ENOTCONN).
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
c.sendall(b"x")
attempt("server recv", lambda: a.recv(1))
attempt("client SHUT_WR", lambda: c.shutdown(socket.SHUT_WR))
attempt("client SHUT_WR again", lambda: c.shutdown(socket.SHUT_WR))
attempt("server recv", lambda: a.recv(1))
attempt("server SHUT_RD", lambda: a.shutdown(socket.SHUT_RD))
attempt("server SHUT_RD again", lambda: a.shutdown(socket.SHUT_RD))
attempt("server recv after SHUT_RD", lambda: a.recv(1))
attempt("server send", lambda: a.send(b"still open"))
attempt("client recv", lambda: c.recv(20))
attempt("client send", lambda: c.send(b"x"))
attempt("server SHUT_WR", lambda: a.shutdown(socket.SHUT_WR))
attempt("client recv", lambda: c.recv(1))
attempt("client SHUT_RD", lambda: c.shutdown(socket.SHUT_RD))
attempt("client SHUT_RDWR", lambda: c.shutdown(socket.SHUT_RDWR))
attempt("server SHUT_WR again", lambda: a.shutdown(socket.SHUT_WR))
attempt("server SHUT_RDWR", lambda: a.shutdown(socket.SHUT_RDWR))
done()
