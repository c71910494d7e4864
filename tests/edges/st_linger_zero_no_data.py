# SO_LINGER {1, 0} and close before any byte was sent: once the server has accepted, and
# while the connection still waits in the listener's queue.
# sdp-conns: 0
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
attempt("accepted: server recv", lambda: a.recv(10))
attempt("accepted: server recv again", lambda: a.recv(10))
attempt("accepted: server send", lambda: a.send(b"x"))
c = socket.create_connection(srv.getsockname())
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
srv.settimeout(1)
try:
    a, _ = srv.accept()
    a.settimeout(10)
    out("queued: accept returns a connection")
    attempt("queued: server recv", lambda: a.recv(10))
except OSError as e:
    out("queued: accept", err(e))
done()
