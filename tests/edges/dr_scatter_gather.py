# sendmsg and os.writev with several buffers; recvmsg_into and os.readv into several; recvmsg
# and recv_into with a byte limit; sendmsg with more buffers than IOV_MAX.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("sendmsg 3 buffers", lambda: c.sendmsg([b"ab", b"cde", b"fgh"]))
attempt("sendmsg empty buffers", lambda: c.sendmsg([b"", b"i", b""]))
attempt("peek all", lambda: a.recv(9, socket.MSG_PEEK | socket.MSG_WAITALL))
bufs = [bytearray(3), bytearray(2), bytearray(10)]
attempt("recvmsg_into", lambda: a.recvmsg_into(bufs)[:3])
out("buffers", [bytes(b) for b in bufs])
attempt("writev", lambda: os.writev(c.fileno(), [b"12", b"3456", b"7"]))
attempt("peek 7", lambda: a.recv(7, socket.MSG_PEEK | socket.MSG_WAITALL))
bufs = [bytearray(4), bytearray(4)]
attempt("readv", lambda: os.readv(a.fileno(), bufs))
out("buffers", [bytes(b) for b in bufs])
c.sendall(b"recvmsg!")
attempt("peek 8", lambda: a.recv(8, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("recvmsg 5", lambda: a.recvmsg(5)[:3])
buf = bytearray(10)
attempt("recv_into 2", lambda: a.recv_into(buf, 2))
out("buffer", bytes(buf))
attempt("recv_into rest", lambda: (a.recv_into(buf), bytes(buf)))
attempt("sendmsg 1025 buffers", lambda: c.sendmsg([b"x"] * 1025))
attempt("sendmsg 1024 buffers", lambda: c.sendmsg([b"y"] * 1024))
attempt("waitall 1024", lambda: a.recv(1024, socket.MSG_WAITALL) == b"y" * 1024)
done()
