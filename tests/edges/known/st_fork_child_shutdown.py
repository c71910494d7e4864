# A connection shared with a forked child: the child's close of its copy ends nothing (the
# parent still holds it); the child's shutdown(SHUT_WR) ends the stream for both; the parent
# still reads what the server sends, and the server reads end of stream.
# sdp-conns: 2
from edge import *

srv, c, a = child_closes_its_copy()
r1, w1 = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    attempt("child shutdown", lambda: c.shutdown(socket.SHUT_WR))
    os.write(w1, b"s")
    os.read(r2, 1)  # the parent is done
    sys.exit(0)
os.read(r1, 1)
attempt("server recv after the child's shutdown", lambda: a.recv(20))
attempt("parent send", lambda: c.send(b"x"))
a.sendall(b"to the parent")
attempt("parent recv", lambda: c.recv(20))
os.write(w2, b"d")
out("child exit", os.waitpid(pid, 0)[1])
done()
