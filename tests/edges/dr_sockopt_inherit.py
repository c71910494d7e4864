# Options set on a listener before accept, as the accepted socket reports them: TCP_NODELAY,
# SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, SO_RCVLOWAT, SO_LINGER, SO_OOBINLINE.
# sdp-conns: 2
import struct
from edge import *

OPTS = [("TCP_NODELAY", socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
        ("SO_KEEPALIVE", socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        ("TCP_KEEPIDLE", socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 77),
        ("TCP_KEEPINTVL", socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 11),
        ("TCP_KEEPCNT", socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 5),
        ("SO_RCVLOWAT", socket.SOL_SOCKET, socket.SO_RCVLOWAT, 3),
        ("SO_OOBINLINE", socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)]


def show(what, s):
    out(what, " ".join("%s=%d" % (n, s.getsockopt(level, opt)) for n, level, opt, _ in OPTS),
        "SO_LINGER=%r" % (struct.unpack("ii", s.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8)),))


srv = listener()
show("listener before", srv)
for _, level, opt, v in OPTS:
    srv.setsockopt(level, opt, v)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 7))
show("listener after", srv)
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
show("accepted", a)
show("client", c)
a.settimeout(10)
c.sendall(b"abc")
attempt("recv", lambda: a.recv(3, socket.MSG_WAITALL))
done()
