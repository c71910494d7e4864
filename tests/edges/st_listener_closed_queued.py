# The listener is closed with two connections still in its queue, one that sent a request and
# waits in recv, one silent: each client's recv reports what the kernel did with them; a
# later connect to the port is refused.
# sdp-conns: 0
from edge import *

srv = listener()
addr = srv.getsockname()
c1 = socket.create_connection(addr)
c1.settimeout(10)
c1.sendall(b"request")
c2 = socket.create_connection(addr)
c2.settimeout(10)
srv.close()
attempt("client with a request recv", lambda: c1.recv(10))
attempt("client with a request send", lambda: c1.send(b"more"))
attempt("silent client recv", lambda: c2.recv(10))
c3 = socket.socket()
c3.settimeout(10)
attempt("connect after", lambda: c3.connect(addr))
done()
