# MSG_TRUNC on a stream socket discards the bytes it names instead of copying them: the next
# read starts after them; with MSG_PEEK it discards nothing; with a NULL buffer (recv(fd,
# NULL, n, MSG_TRUNC), valid on TCP to skip n bytes) it discards them too.
# sdp-conns: 2
import ctypes
import struct
from edge import *

libc = ctypes.CDLL(None, use_errno=True)
libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.recv.restype = ctypes.c_ssize_t
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"0123456789abcdef")
attempt("peek 16", lambda: a.recv(16, socket.MSG_PEEK | socket.MSG_WAITALL))
buf = bytearray(b"." * 16)
attempt("recv_into MSG_TRUNC 4", lambda: a.recv_into(buf, 4, socket.MSG_TRUNC))
out("buffer", bytes(buf))
attempt("recv 4", lambda: a.recv(4))
attempt("recv_into MSG_TRUNC|MSG_PEEK 4", lambda: a.recv_into(buf, 4, socket.MSG_TRUNC | socket.MSG_PEEK))
r = libc.recv(a.fileno(), None, 4, socket.MSG_TRUNC)
out("recv NULL MSG_TRUNC 4", r, errno.errorcode.get(ctypes.get_errno(), "0") if r < 0 else "")
attempt("recv 100", lambda: a.recv(100))
done()
