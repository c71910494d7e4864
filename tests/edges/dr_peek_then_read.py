# MSG_PEEK of part of the data, then of all of it, then normal reads: peeking consumes nothing.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"hello world")
attempt("peek 5", lambda: a.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("peek 11", lambda: a.recv(11, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("peek 100", lambda: a.recv(100, socket.MSG_PEEK))
attempt("recv 3", lambda: a.recv(3))
attempt("peek 100 after", lambda: a.recv(100, socket.MSG_PEEK))
attempt("peek 2 after", lambda: a.recv(2, socket.MSG_PEEK))
attempt("recv 100", lambda: a.recv(100))
attempt("peek dontwait empty", lambda: a.recv(100, socket.MSG_PEEK | socket.MSG_DONTWAIT))
c.sendall(b"more")
attempt("peek waitall new", lambda: a.recv(4, socket.MSG_PEEK | socket.MSG_WAITALL))
buf = bytearray(8)
attempt("recv_into peek", lambda: (a.recv_into(buf, 8, socket.MSG_PEEK), bytes(buf)))
attempt("recv 4", lambda: a.recv(4))
done()
