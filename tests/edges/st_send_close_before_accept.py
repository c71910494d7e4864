# A client connects, sends a request and closes at once, before the server accepts (a
# fire-and-forget sender): the server accepts later and reads the request, then end of stream.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
c.sendall(b"request")
c.close()
a, _ = srv.accept()
a.settimeout(10)
out("server read", read_to_end(a))
attempt("recv again", lambda: a.recv(10))
done()
