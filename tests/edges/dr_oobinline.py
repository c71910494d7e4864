# SO_OOBINLINE: the urgent byte (the last of a send with MSG_OOB) stays in the stream, in
# order; recv MSG_OOB fails with EINVAL; POLLPRI and SIOCATMARK mark it.
# sdp-conns: 2
import fcntl
import select
import struct
from edge import *

SIOCATMARK = 0x8905
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
a.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
out("SO_OOBINLINE", a.getsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE))
c.sendall(b"xy")
attempt("server got", lambda: a.recv(2))
c.send(b"ab!", socket.MSG_OOB)
c.sendall(b"cd")
p = select.poll()
p.register(a, select.POLLPRI)
out("POLLPRI", bool(p.poll(10000)))
attempt("peek 5", lambda: a.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("recv MSG_OOB", lambda: a.recv(1, socket.MSG_OOB))
out("at mark", struct.unpack("i", fcntl.ioctl(a, SIOCATMARK, b"\0\0\0\0"))[0])
attempt("recv up to the mark", lambda: a.recv(10))
out("at mark", struct.unpack("i", fcntl.ioctl(a, SIOCATMARK, b"\0\0\0\0"))[0])
attempt("recv rest", lambda: a.recv(10))
done()
