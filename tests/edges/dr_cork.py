# TCP_CORK set, two small writes, then uncorked: the data arrives whole and in order, the
# option reads back each time; TCP_NODELAY and TCP_CORK together.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
out("TCP_CORK", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
out("TCP_CORK set", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
c.sendall(b"head")
c.sendall(b"er|body")
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
out("TCP_CORK cleared", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
attempt("recv waitall", lambda: a.recv(11, socket.MSG_WAITALL))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
out("both", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
c.sendall(b"x" * 3000)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
attempt("recv waitall 3000", lambda: len(a.recv(3000, socket.MSG_WAITALL)))
done()
