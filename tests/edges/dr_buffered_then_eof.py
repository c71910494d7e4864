# The peer writes 5 bytes in two sends and closes before anything is read: readiness shows the
# data and the end, FIONREAD counts the 5, and reads return them before end of stream.
# sdp-conns: 2
import fcntl
import select
import struct
import termios
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"ab")
c.sendall(b"cde")
c.close()
p = select.poll()
p.register(a, 0x2000)
out("peer's end seen", bool(p.poll(10000)))
p = select.poll()
p.register(a, select.POLLIN | select.POLLOUT | 0x2000)
out("poll", ["|".join(n for n, v in (("IN", select.POLLIN), ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
                                     ("HUP", select.POLLHUP), ("RDHUP", 0x2000)) if m & v) for _, m in p.poll(0)])
out("FIONREAD", struct.unpack("i", fcntl.ioctl(a, termios.FIONREAD, b"\0\0\0\0"))[0])
attempt("recv 2", lambda: a.recv(2))
attempt("recv 10", lambda: a.recv(10))
attempt("recv at end", lambda: a.recv(10))
attempt("recv at end again", lambda: a.recv(10))
done()
