# The client closes just after the server's accept; the server sends, then reads.
# sdp-conns: 0
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.close()
attempt("server send", lambda: a.send(b"hello\n"))
attempt("server recv", lambda: a.recv(10))
done()
