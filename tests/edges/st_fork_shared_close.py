# A connection in use is inherited by a forked child that closes its copy and exits: that ends
# nothing (the parent still holds it); the parent goes on both ways, then shuts its sending
# side and reads the server's last words and end of stream.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
c.sendall(b"before fork")
attempt("server recv", lambda: a.recv(20))
pid = os.fork()
if pid == 0:
    c.close()
    sys.exit(0)
out("child exit", os.waitpid(pid, 0)[1])
p = select.poll()
p.register(a, select.POLLIN)
out("server readable after the child's close", bool(p.poll(300)))
c.sendall(b"parent still")
attempt("server recv", lambda: a.recv(20))
c.shutdown(socket.SHUT_WR)
attempt("server recv after the parent's shutdown", lambda: a.recv(20))
a.sendall(b"to the parent")
attempt("parent recv", lambda: c.recv(20))
a.close()
attempt("parent recv at end", lambda: c.recv(20))
done()
