# The client sends a request and closes just after the server accepted, before the server
# read anything: the server reads the request, then end of stream; its reply is accepted.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"request")
c.close()
out("server read", read_to_end(a))
attempt("recv again", lambda: a.recv(10))
attempt("send", lambda: a.send(b"reply"))
done()
