# A socket whose connect was refused (nobody listens) connects again, to a listener: a
# blocking socket retries at once; a socket with a timeout (non-blocking underneath) learns of
# the old failure first (ECONNABORTED), then retries. Each new connection carries a request.
# (Preloaded, a socket that fell back to TCP on the refusal stays TCP for its retry.)
# sdp-conns: 0
from edge import *

s = socket.socket()
s.bind(("127.0.0.1", 0))
nobody = s.getsockname()
s.close()
srv = listener()
srv.settimeout(10)
for timeout in (None, 10):
    out("timeout", timeout)
    c = socket.socket()
    c.settimeout(timeout)
    attempt("connect to nobody", lambda: c.connect(nobody))
    attempt("SO_ERROR", lambda: c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
    attempt("getpeername", c.getpeername)
    attempt("connect to the listener", lambda: c.connect(srv.getsockname()))
    attempt("getpeername", lambda: c.getpeername() == srv.getsockname())
    if timeout:
        attempt("connect to the listener again", lambda: c.connect(srv.getsockname()))
    a, _ = srv.accept()
    a.settimeout(10)
    c.settimeout(10)
    c.sendall(b"retry")
    attempt("server recv", lambda: a.recv(10))
    a.sendall(b"welcome")
    attempt("client recv", lambda: c.recv(10))
done()
