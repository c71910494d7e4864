# Writes to a peer that closed: the first write after its orderly close goes, the reset that
# answers it is waited for; then MSG_NOSIGNAL fails without SIGPIPE and a plain send fails
# with one.
# sdp-conns: 2
import select
import signal
from edge import *

pipes = []
signal.signal(signal.SIGPIPE, lambda *_: pipes.append(1))
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
c.sendall(b"x")
attempt("recv", lambda: a.recv(1))
c.close()
attempt("recv at end", lambda: a.recv(1))
attempt("send after the peer's close", lambda: a.send(b"y", socket.MSG_NOSIGNAL))
p = select.poll()
p.register(a, select.POLLERR)
ev = p.poll(10000)
out("reset seen", sorted(n for n, v in (("ERR", select.POLLERR), ("HUP", select.POLLHUP))
                         if any(m & v for _, m in ev)))
attempt("send MSG_NOSIGNAL", lambda: a.send(b"y", socket.MSG_NOSIGNAL))
out("SIGPIPE", len(pipes))
attempt("send MSG_NOSIGNAL again", lambda: a.send(b"y", socket.MSG_NOSIGNAL))
out("SIGPIPE", len(pipes))
attempt("send", lambda: a.send(b"y"))
out("SIGPIPE", len(pipes))
attempt("sendall", lambda: a.sendall(b"y"))
out("SIGPIPE", len(pipes))
attempt("recv", lambda: a.recv(1))
done()
