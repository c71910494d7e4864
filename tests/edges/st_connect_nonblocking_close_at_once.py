# A non-blocking connect closed at once, without waiting for the connection (a client that gave
# up): the server accepts it and reads end of stream; then the server serves a client.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c = connect_nonblocking(srv.getsockname())
c.close()
srv.settimeout(10)
a, _ = srv.accept()
a.settimeout(10)
attempt("server recv", lambda: a.recv(10))
c, a = accepted(srv)
c.sendall(b"next")
attempt("server recv", lambda: a.recv(10))
done()
