# FIONREAD and SIOCINQ: bytes waiting after the peer sent 100, after reading part, after
# reading all, and with the peer gone; on a listening socket.
# sdp-conns: 2
import fcntl
import struct
import termios
from edge import *

SIOCINQ = termios.FIONREAD


def inq(s, req=termios.FIONREAD):
    return struct.unpack("i", fcntl.ioctl(s, req, b"\0\0\0\0"))[0]


srv = listener()
attempt("listener FIONREAD", lambda: inq(srv))
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("empty", lambda: inq(a))
attempt("client empty", lambda: inq(c))
c.sendall(bytes(range(100)))
attempt("peek 100", lambda: len(a.recv(100, socket.MSG_PEEK | socket.MSG_WAITALL)))
attempt("after 100", lambda: inq(a))
attempt("SIOCINQ", lambda: inq(a, SIOCINQ))
attempt("read 30", lambda: len(a.recv(30)))
attempt("after reading 30", lambda: inq(a))
attempt("read 70", lambda: len(a.recv(100)))
attempt("after reading all", lambda: inq(a))
c.sendall(b"12345")
c.close()
attempt("peek to end", lambda: a.recv(10, socket.MSG_PEEK | socket.MSG_WAITALL))
attempt("peer closed, 5 waiting", lambda: inq(a))
attempt("read", lambda: a.recv(10))
attempt("at end of stream", lambda: inq(a))
done()
