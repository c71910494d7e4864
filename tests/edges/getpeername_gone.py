# getpeername and getsockname after the peer closed: still the addresses of the connection.
# sdp-conns: 0
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, peer = srv.accept()
cport = c.getsockname()[1]
a.settimeout(10)
c.close()
attempt("recv", lambda: a.recv(1))
attempt("peer is the client", lambda: a.getpeername() == peer and a.getpeername()[1] == cport)
attempt("local is the listener's", lambda: a.getsockname() == srv.getsockname())
done()
