# SO_LINGER {1, 0} on a connection with data the closer never read: the peer's next read
# reports the reset; and on one whose peer has unread data: the peer reads what came first.
# sdp-conns: 4
from edge import *
import struct

srv = listener()
# The closer has unread data.
c, a = accepted(srv)
c.sendall(b"ping")
attempt("server got", lambda: a.recv(4))
a.sendall(b"unread")
attempt("client sees it waiting", lambda: c.recv(6, socket.MSG_PEEK))
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
attempt("server recv", lambda: a.recv(10))
attempt("server send", lambda: a.send(b"x"))
# The peer has unread data when the closer aborts.
c, a = accepted(srv)
c.sendall(b"hello")
attempt("server peeks", lambda: a.recv(5, socket.MSG_PEEK))
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
attempt("server recv", lambda: a.recv(10))
attempt("server recv again", lambda: a.recv(10))
done()
