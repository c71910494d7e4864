# Readiness and SO_ERROR after the peer's abortive close (SO_LINGER {1, 0}); SIGPIPE on a
# write without MSG_NOSIGNAL after it.
# sdp-conns: 2
import select
import signal
import struct
from edge import *

pipes = []
signal.signal(signal.SIGPIPE, lambda *_: pipes.append(1))
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"x")
attempt("recv", lambda: a.recv(1))
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
p = select.poll()
p.register(a, select.POLLIN | 0x2000)
ev = p.poll(10000)
out("poll", sorted(n for n, v in (("IN", select.POLLIN), ("ERR", select.POLLERR), ("HUP", select.POLLHUP),
                                  ("RDHUP", 0x2000)) if any(m & v for _, m in ev)))
out("SO_ERROR", errno.errorcode.get(a.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
attempt("send", lambda: a.send(b"y"))
attempt("send again", lambda: a.send(b"y"))
out("SIGPIPE", len(pipes))
attempt("recv", lambda: a.recv(1))
done()
