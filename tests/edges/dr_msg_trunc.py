# MSG_TRUNC on a stream socket discards the bytes it names: the next read starts after them;
# with MSG_PEEK it discards nothing.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"0123456789abcdef")
attempt("peek 16", lambda: a.recv(16, socket.MSG_PEEK | socket.MSG_WAITALL))
buf = bytearray(b"." * 16)
attempt("recv_into MSG_TRUNC 4", lambda: a.recv_into(buf, 4, socket.MSG_TRUNC))
attempt("recv 4", lambda: a.recv(4))
attempt("recv_into MSG_TRUNC|MSG_PEEK 4", lambda: a.recv_into(buf, 4, socket.MSG_TRUNC | socket.MSG_PEEK))
attempt("recv 100", lambda: a.recv(100))
done()
