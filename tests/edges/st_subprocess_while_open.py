# A server runs a program (subprocess, which forks with vfork and closes every descriptor but
# 0-2 in the child before exec) while it holds a connection it has not used yet and one in use:
# the child's closes end neither; both are served afterwards, both ways.
# sdp-conns: 4
import subprocess
from edge import *

srv = listener()
c1 = socket.create_connection(srv.getsockname())
a1, _ = srv.accept()
c2 = socket.create_connection(srv.getsockname())
a2, _ = srv.accept()
for x in (a1, c1, a2, c2):
    x.settimeout(10)
c2.sendall(b"in use")
attempt("server recv on the one in use", lambda: a2.recv(20))
out("program", subprocess.run([sys.executable, "-c", "pass"]).returncode)
c1.sendall(b"first")
attempt("server recv on the unused one", lambda: a1.recv(20))
c2.sendall(b"second")
attempt("server recv on the one in use", lambda: a2.recv(20))
a1.sendall(b"back 1")
a2.sendall(b"back 2")
attempt("client 1 recv", lambda: c1.recv(20))
attempt("client 2 recv", lambda: c2.recv(20))
for x in (a1, a2):
    x.close()
attempt("client 1 recv at end", lambda: c1.recv(20))
attempt("client 2 recv at end", lambda: c2.recv(20))
done()
