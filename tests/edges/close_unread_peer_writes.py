# A server closes with unread data while its client still writes: the client's writes end
# with a reset (ECONNRESET or EPIPE), never hang, and SIGPIPE is not raised with MSG_NOSIGNAL.
# sdp-conns: 2
import signal
import time
from edge import *

signal.signal(signal.SIGPIPE, signal.SIG_IGN)
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
c.settimeout(10)
a.settimeout(10)
c.sendall(b"first")
attempt("server got", lambda: a.recv(5))
c.sendall(b"unread by the server")
attempt("server peeks", lambda: a.recv(4, socket.MSG_PEEK))
a.close()
result = "no error"
for _ in range(200):
    try:
        c.send(b"x" * 65536, socket.MSG_NOSIGNAL)
    except OSError as e:
        result = err(e)
        break
    time.sleep(0.005)  # the scenario: a writer that keeps going
out("client's writes end with", "a reset" if result in ("ECONNRESET", "EPIPE") else result)
attempt("client recv", lambda: c.recv(10))
done()
