# Urgent data on an established connection: the byte is out of band, SIOCATMARK marks it.
# sdp-conns: 2
import fcntl
import select
import struct
from edge import *

SIOCATMARK = 0x8905
srv = listener()
c, a = accepted(srv)
c.sendall(b"ab")
attempt("server got", lambda: a.recv(2))
c.send(b"!", socket.MSG_OOB)
c.sendall(b"cd")
p = select.poll()
p.register(a, select.POLLPRI)
out("POLLPRI", bool(p.poll(10000)))
attempt("oob", lambda: a.recv(1, socket.MSG_OOB))
got = b""
while len(got) < 2:
    got += a.recv(10)
out("inline", got)
out("at mark", struct.unpack("i", fcntl.ioctl(a, SIOCATMARK, b"\0\0\0\0"))[0])
done()
