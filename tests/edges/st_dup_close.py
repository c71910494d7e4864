# A connection with two descriptors (dup): closing one ends nothing; shutdown through the other
# ends the stream; the first descriptor's copy is then closed too.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c, a = accepted(srv)
c.sendall(b"one")
attempt("server recv", lambda: a.recv(10))
d = c.dup()
c.close()
p = select.poll()
p.register(a, select.POLLIN)
out("server readable after one copy closed", bool(p.poll(300)))
d.settimeout(10)
d.sendall(b"two")
attempt("server recv", lambda: a.recv(10))
a.sendall(b"back")
attempt("dup recv", lambda: d.recv(10))
e = d.dup()
attempt("shutdown through a dup", lambda: e.shutdown(socket.SHUT_WR))
attempt("server recv", lambda: a.recv(10))
attempt("send through the other", lambda: d.send(b"x"))
e.close()
d.close()
attempt("server send", lambda: a.send(b"late"))
done()
