# The listener is closed while two accepted connections are in use: both go on both ways and
# end in order; new connects to the port are refused.
# sdp-conns: 4
from edge import *

srv = listener()
addr = srv.getsockname()
pairs = []
for _ in range(2):
    c = socket.create_connection(addr)
    a, _ = srv.accept()
    for x in (a, c):
        x.settimeout(10)
    pairs.append((c, a))
srv.close()
for i, (c, a) in enumerate(pairs):
    c.sendall(b"request %d" % i)
    attempt("server recv", lambda: a.recv(20))
    a.sendall(b"answer %d" % i)
    attempt("client recv", lambda: c.recv(20))
n = socket.socket()
n.settimeout(10)
attempt("connect after", lambda: n.connect(addr))
for c, a in pairs:
    a.close()
    attempt("client reads end", lambda: c.recv(10))
done()
