# CPython 3.13's socketpair() fallback, in one thread: listen, connect non-blocking, accept,
# then both ends blocking.
# sdp-conns: 2
from edge import *

lsock = listener(1)
csock = connect_nonblocking(lsock.getsockname())
csock.setblocking(True)
ssock, _ = lsock.accept()
lsock.close()
ssock.settimeout(10)
csock.settimeout(10)
csock.sendall(b"ping")
attempt("server got", lambda: ssock.recv(10))
ssock.sendall(b"pong")
attempt("client got", lambda: csock.recv(10))
done()
