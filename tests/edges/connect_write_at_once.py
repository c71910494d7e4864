# A non-blocking connect written to at once, without waiting for the socket to be writable;
# then a socket switched to blocking that sendall()s before the server accepts.
# sdp-conns: 4
from edge import *

srv = listener()
c = connect_nonblocking(srv.getsockname())
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

c2 = connect_nonblocking(srv.getsockname())
c2.setblocking(True)
c2.sendall(b"x" * 100000)
a2, _ = srv.accept()
a2.settimeout(10)
c2.close()
out("bulk", len(read_to_end(a2)))
done()
