# A non-blocking connect written to at once, without waiting for the socket to be writable;
# then a socket switched to blocking that sendall()s before the server accepts.
# sdp-conns: 4
from edge import *

srv = listener()
c = socket.socket()
c.setblocking(False)
try:
    c.connect(srv.getsockname())
except BlockingIOError:
    pass
sent = 0
try:
    sent = c.send(b"hello")
except BlockingIOError:
    c.setblocking(True)  # still connecting: wait as a blocking socket would
    sent = c.send(b"hello")
out("send", sent)
a, _ = srv.accept()
a.settimeout(10)
attempt("server recv", lambda: a.recv(100))

c2 = socket.socket()
c2.setblocking(False)
try:
    c2.connect(srv.getsockname())
except BlockingIOError:
    pass
c2.setblocking(True)
c2.sendall(b"x" * 100000)
a2, _ = srv.accept()
a2.settimeout(10)
got = 0
while got < 100000:
    d = a2.recv(65536)
    if not d:
        break
    got += len(d)
out("bulk", got)
done()
