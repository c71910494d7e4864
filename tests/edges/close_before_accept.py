# A client connects and closes before the server accepts (a health check, a port probe):
# select says the listener is readable, accept returns the connection, recv reads 0.
# sdp-conns: 0
import select
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
c.close()
r, _, _ = select.select([srv], [], [], 10)
out("listener readable", bool(r))
srv.setblocking(False)
a, _ = srv.accept()
a.setblocking(True)
a.settimeout(10)
attempt("recv", lambda: a.recv(10))
attempt("recv again", lambda: a.recv(10))
done()
