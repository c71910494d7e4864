# A server with SO_REUSEADDR closes its connection first (its end waits in TIME_WAIT) and its
# listener; a new listener binds the same port with SO_REUSEADDR at once and serves a client.
# sdp-conns: 4
from edge import *


def reuse_listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)
    return s


srv = reuse_listener(sdp_free_port())
addr = server_closes_first(srv)
attempt("rebind with SO_REUSEADDR", lambda: reuse_listener(addr[1]).close())
s = reuse_listener(addr[1])
c, a = accepted(s)
c.sendall(b"again")
attempt("server recv", lambda: a.recv(10))
a.sendall(b"welcome back")
attempt("client recv", lambda: c.recv(20))
done()
