# shutdown on a socket that is not connected: a new socket, a bound one, a listener (SHUT_WR),
# and a socket whose connect was refused.
# sdp-conns: 0
from edge import *

s = socket.socket()
for how in ("SHUT_RD", "SHUT_WR", "SHUT_RDWR"):
    attempt("new socket " + how, lambda: s.shutdown(getattr(socket, how)))
b = socket.socket()
b.bind(("127.0.0.1", 0))
attempt("bound socket SHUT_WR", lambda: b.shutdown(socket.SHUT_WR))
srv = listener()
attempt("listener SHUT_WR", lambda: srv.shutdown(socket.SHUT_WR))
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
attempt("listener still accepts", lambda: a.getsockname() == srv.getsockname())
port = b.getsockname()[1]
r = socket.socket()
attempt("connect to nobody", lambda: r.connect(("127.0.0.1", port)))
attempt("refused socket SHUT_RDWR", lambda: r.shutdown(socket.SHUT_RDWR))
done()
