# getsockopt on a listening, a connected and an accepted socket: SO_TYPE, SO_DOMAIN,
# SO_PROTOCOL, SO_ACCEPTCONN, SO_ERROR, SO_KEEPALIVE, TCP_NODELAY, SO_REUSEADDR (an accepted
# socket shows its listener's, not its SDP twin's); TCP_NODELAY, SO_KEEPALIVE and
# the keepalive timings set on connected sockets then read back; the connection still carries
# data.
# sdp-conns: 2
import struct
from edge import *

OPTS = [("SO_TYPE", socket.SOL_SOCKET, socket.SO_TYPE), ("SO_DOMAIN", socket.SOL_SOCKET, socket.SO_DOMAIN),
        ("SO_PROTOCOL", socket.SOL_SOCKET, socket.SO_PROTOCOL),
        ("SO_ACCEPTCONN", socket.SOL_SOCKET, socket.SO_ACCEPTCONN),
        ("SO_ERROR", socket.SOL_SOCKET, socket.SO_ERROR), ("SO_KEEPALIVE", socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        ("TCP_NODELAY", socket.IPPROTO_TCP, socket.TCP_NODELAY),
        ("SO_REUSEADDR", socket.SOL_SOCKET, socket.SO_REUSEADDR)]


def show(what, s):
    vals = []
    for name, level, opt in OPTS:
        try:
            vals.append("%s=%d" % (name, s.getsockopt(level, opt)))
        except OSError as e:
            vals.append("%s=%s" % (name, err(e)))
    out(what, " ".join(vals))


srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
show("listener", srv)
show("client", c)
show("accepted", a)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
a.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
show("client after TCP_NODELAY", c)
show("accepted after SO_KEEPALIVE", a)
for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"):
    out("accepted", name, a.getsockopt(socket.IPPROTO_TCP, getattr(socket, name)))
a.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30)
a.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 4)
a.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"):
    out("accepted", name, "after setting", a.getsockopt(socket.IPPROTO_TCP, getattr(socket, name)))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
out("client TCP_NODELAY cleared", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"still works")
attempt("recv", lambda: a.recv(11, socket.MSG_WAITALL))
done()
