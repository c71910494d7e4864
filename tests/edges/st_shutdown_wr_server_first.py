# The server speaks first and shuts its sending side (a banner, then end of stream); the
# client reads to end of stream, then sends a reply the server reads; then the client shuts
# too and both read end of stream.
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
a.sendall(b"banner " * 1000)
a.shutdown(socket.SHUT_WR)
got = read_to_end(c)
out("client read", len(got), got[:14])
attempt("server send after its shutdown", lambda: a.send(b"x"))
c.sendall(b"reply")
attempt("server recv", lambda: a.recv(10))
c.shutdown(socket.SHUT_WR)
attempt("server recv at end", lambda: a.recv(10))
attempt("client recv at end", lambda: c.recv(10))
done()
