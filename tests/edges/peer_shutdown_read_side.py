# shutdown(SHUT_RD) and SHUT_RDWR on one end; what each end then sees.
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
c.sendall(b"abc")
attempt("server got", lambda: a.recv(3))
a.shutdown(socket.SHUT_RDWR)
attempt("server recv after SHUT_RDWR", lambda: a.recv(3))
attempt("server send after SHUT_RDWR", lambda: a.send(b"x"))
attempt("client recv", lambda: c.recv(3))
done()
