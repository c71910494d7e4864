# getsockname and getpeername on both ends: each end's peer is the other's local address,
# after connect, after a request and answer, after the server closed and the client read end
# of stream; on a new and a listening socket (ENOTCONN); after close (EBADF).
# sdp-conns: 2
from edge import *


def check(when, c, a, srv, peer):
    out(when, "client peer is the listener", c.getpeername() == srv.getsockname(),
        "client local is the accepted peer", c.getsockname() == peer,
        "server local", a.getsockname() == srv.getsockname(),
        "server peer", a.getpeername() == peer)


s = socket.socket()
attempt("new socket getpeername", s.getpeername)
attempt("new socket getsockname", s.getsockname)
srv = listener()
attempt("listener getpeername", srv.getpeername)
c = socket.create_connection(srv.getsockname())
a, peer = srv.accept()
for x in (a, c):
    x.settimeout(10)
check("connected", c, a, srv, peer)
c.sendall(b"question")
attempt("server recv", lambda: a.recv(8))
a.sendall(b"answer")
attempt("client recv", lambda: c.recv(6))
check("after data", c, a, srv, peer)
a.shutdown(socket.SHUT_WR)
attempt("client recv", lambda: c.recv(6))
check("server shut", c, a, srv, peer)
a.close()
attempt("client recv", lambda: c.recv(6))
attempt("client still names its peer", lambda: c.getpeername() == srv.getsockname())
attempt("client local", lambda: c.getsockname() == peer)
attempt("closed socket getpeername", a.getpeername)
done()
