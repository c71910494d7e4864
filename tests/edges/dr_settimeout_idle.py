# A receive timeout (settimeout) expiring on an idle connection leaves it usable: data sent
# afterwards arrives, each way; SO_RCVTIMEO and SO_SNDTIMEO set by setsockopt read back.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(0.2)
attempt("recv, timeout 0.2", lambda: a.recv(10))
attempt("recv again, timeout 0.2", lambda: a.recv(10))
c.sendall(b"later")
a.settimeout(10)
attempt("recv", lambda: a.recv(10))
c.settimeout(0.2)
attempt("client recv, timeout 0.2", lambda: c.recv(10))
a.sendall(b"back")
c.settimeout(10)
attempt("client recv", lambda: c.recv(10))
out("SO_RCVTIMEO default", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)))
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 3, 500000))
a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 500000))
out("SO_RCVTIMEO", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)))
out("SO_SNDTIMEO", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16)))
done()
