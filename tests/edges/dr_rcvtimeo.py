# Receive timeouts on an idle connection: settimeout and SO_RCVTIMEO expire, the connection
# stays usable and data sent afterwards arrives; SO_RCVTIMEO and SO_SNDTIMEO read back.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(0.2)
attempt("recv, settimeout 0.2", lambda: a.recv(10))
c.sendall(b"later")
a.settimeout(10)
attempt("recv", lambda: a.recv(10))
a.settimeout(None)
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
out("SO_RCVTIMEO", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)))
out("SO_SNDTIMEO", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16)))
attempt("recv, SO_RCVTIMEO 0.2", lambda: a.recv(10))
attempt("recv waitall, SO_RCVTIMEO 0.2", lambda: a.recv(10, socket.MSG_WAITALL))
c.sendall(b"12345")
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("peek", lambda: a.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL))
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
attempt("recv waitall 10, 5 there", lambda: a.recv(10, socket.MSG_WAITALL))
attempt("recv after", lambda: a.recv(10))
a.sendall(b"still")
c.settimeout(10)
attempt("client got", lambda: c.recv(10))
done()
