# After a non-blocking connect that poll and SO_ERROR say succeeded, connect() is called again
# (the idiom some event loops use to learn the result): Linux answers 0 the first time, then
# EISCONN.
# sdp-conns: 2
import select
from edge import *

srv = listener()
addr = srv.getsockname()
c = connect_nonblocking(addr)
p = select.poll()
p.register(c, select.POLLOUT)
out("poll", [m == select.POLLOUT for _, m in p.poll(10000)])
out("SO_ERROR", errno.errorcode.get(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
r = c.connect_ex(addr)
out("connect_ex again", errno.errorcode.get(r, r))
attempt("connect again", lambda: c.connect(addr))
a, _ = srv.accept()
a.settimeout(10)
c.setblocking(True)
c.settimeout(10)
c.sendall(b"one")
attempt("server recv", lambda: a.recv(10))
a.sendall(b"ONE")
attempt("client recv", lambda: c.recv(10))
done()
