# dup() and dup2 of a connected socket: each descriptor reads and writes the same connection;
# closing one leaves the others working; the peer sees end of stream only after the last.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
d = a.dup()
fd2 = os.dup(a.fileno())
c.sendall(b"one")
attempt("dup reads", lambda: d.recv(10))
c.sendall(b"two")
attempt("os.dup reads", lambda: os.read(fd2, 10))
attempt("original writes", lambda: a.send(b"A"))
attempt("dup writes", lambda: d.send(b"B"))
attempt("os.dup writes", lambda: os.write(fd2, b"C"))
attempt("client got", lambda: c.recv(3, socket.MSG_WAITALL))
out("same peer", d.getpeername() == a.getpeername())
a.close()
c.sendall(b"three")
attempt("dup reads after original closed", lambda: d.recv(10))
attempt("dup writes after original closed", lambda: d.send(b"D"))
attempt("client got", lambda: c.recv(10))
d.close()
attempt("os.dup writes, only it left", lambda: os.write(fd2, b"E"))
attempt("client got", lambda: c.recv(10))
attempt("client recv dontwait", lambda: c.recv(10, socket.MSG_DONTWAIT))
os.close(fd2)
attempt("client at end", lambda: c.recv(10))
done()
