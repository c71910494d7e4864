# A connection in use is inherited by a forked child that closes its copy and exits: that ends
# nothing (the parent still holds it); the parent goes on both ways, then shuts its sending
# side and reads the server's last words and end of stream.
# sdp-conns: 2
from edge import *

srv, c, a = child_closes_its_copy()
c.shutdown(socket.SHUT_WR)
attempt("server recv after the parent's shutdown", lambda: a.recv(20))
a.sendall(b"to the parent")
attempt("parent recv", lambda: c.recv(20))
a.close()
attempt("parent recv at end", lambda: c.recv(20))
done()
