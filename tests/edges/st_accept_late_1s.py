# A busy server (a forked child) accepts 1 s after two clients connected: one sent its whole
# request and shut its sending side (HTTP/1.0 style), one sent nothing; both wait in recv.
# The server reads each request to end of stream and answers.
# sdp-conns: 4
import time
from edge import *

srv = listener()
pid = os.fork()
if pid == 0:
    time.sleep(1)  # the scenario: a busy server
    a, _ = srv.accept()
    a.settimeout(10)
    req = read_to_end(a)
    a.sendall(b"got " + req)
    a.close()
    b, _ = srv.accept()
    b.settimeout(10)
    b.sendall(b"banner")
    b.settimeout(10)
    req = b.recv(10)
    b.sendall(b"got " + req)
    b.close()
    sys.exit(0)
c1 = socket.create_connection(srv.getsockname())
c1.settimeout(10)
c1.sendall(b"GET /")
c1.shutdown(socket.SHUT_WR)
c2 = socket.create_connection(srv.getsockname())
c2.settimeout(10)
out("first client read", read_to_end(c1))
attempt("second client recv", lambda: c2.recv(6))
c2.sendall(b"quit")
out("second client read", read_to_end(c2))
out("server exit", os.waitpid(pid, 0)[1])
done()
