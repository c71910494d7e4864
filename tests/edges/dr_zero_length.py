# Sends and receives of zero bytes: on an empty connection and with data waiting, which they
# leave where it is.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("send empty", lambda: c.send(b""))
attempt("sendall empty", lambda: c.sendall(b""))
attempt("sendmsg no buffers", lambda: c.sendmsg([]))
attempt("os.write empty", lambda: os.write(c.fileno(), b""))
attempt("recv 0 empty", lambda: a.recv(0))
attempt("recv 0 dontwait empty", lambda: a.recv(0, socket.MSG_DONTWAIT))
attempt("os.read 0 empty", lambda: os.read(a.fileno(), 0))
c.sendall(b"abc")
attempt("peek 3", lambda: a.recv(3, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("recv 0 with data", lambda: a.recv(0))
attempt("recv_into empty buffer with data", lambda: a.recv_into(bytearray(0)))
attempt("os.read 0 with data", lambda: os.read(a.fileno(), 0))
attempt("recv 10", lambda: a.recv(10))
c.sendall(b"x")
attempt("recv 1", lambda: a.recv(1))
attempt("recv dontwait empty", lambda: a.recv(1, socket.MSG_DONTWAIT))
done()
