# MSG_PEEK and MSG_WAITALL when the peer has sent 3 bytes and closed.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"abc")
c.close()
attempt("peek", lambda: a.recv(10, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("waitall", lambda: a.recv(10, socket.MSG_WAITALL))
attempt("recv", lambda: a.recv(10))
done()
