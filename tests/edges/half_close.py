# shutdown(SHUT_WR) each way: the other end reads to end of stream and still answers.
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
c.sendall(b"question")
c.shutdown(socket.SHUT_WR)
out("server read", read_to_end(a))
a.sendall(b"answer")
a.shutdown(socket.SHUT_WR)
out("client read", read_to_end(c))
attempt("client send after both shut", lambda: c.send(b"late"))
done()
