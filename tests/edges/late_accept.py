# The server accepts 2.5 s after the client connected, sent 5 bytes and blocked in recv
# (longer than SDP_CONNECT_TIMEOUT's default, 2 s).
# sdp-conns: 2
import time
from edge import *

srv = listener()
pid = os.fork()
if pid == 0:
    time.sleep(2.5)  # the scenario: a busy server
    a, _ = srv.accept()
    d = a.recv(10)
    a.sendall(d.upper())
    a.close()
    sys.exit(0)
c = socket.create_connection(srv.getsockname())
c.settimeout(30)
c.sendall(b"hello")
attempt("client got", lambda: c.recv(10))
attempt("then", lambda: c.recv(10))
os.waitpid(pid, 0)
done()
