# connect() called again on a connected socket (a blocking connect): to the same address and to
# another, EISCONN; the connection still carries a request and answer.
# sdp-conns: 2
from edge import *

srv = listener()
addr = srv.getsockname()
c = socket.create_connection(addr)
attempt("connect again", lambda: c.connect(addr))
s = socket.socket()
s.bind(("127.0.0.1", 0))
attempt("connect elsewhere", lambda: c.connect(s.getsockname()))
r = c.connect_ex(addr)
out("connect_ex again", errno.errorcode.get(r, r))
a, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
c.sendall(b"one")
attempt("server recv", lambda: a.recv(10))
a.sendall(b"ONE")
attempt("client recv", lambda: c.recv(10))
attempt("peer unchanged", lambda: c.getpeername() == addr)
done()
