# shutdown(SHUT_RDWR) by a client that has unread bytes from the server: what the client's recv
# and send then give, what the server reads, and what the server's writes give after it.
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
c.sendall(b"request")
attempt("server recv", lambda: a.recv(10))
a.sendall(b"unread answer")
attempt("client peeks", lambda: c.recv(13, socket.MSG_PEEK))
attempt("client SHUT_RDWR", lambda: c.shutdown(socket.SHUT_RDWR))
attempt("client send", lambda: c.send(b"x"))
attempt("server recv", lambda: a.recv(10))
attempt("server send", lambda: a.send(b"more"))
c.close()
attempt("server recv after close", lambda: a.recv(10))
done()
