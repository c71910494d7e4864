# A non-blocking connect to a port nobody listens on: poll, SO_ERROR, a second connect.
# sdp-conns: 0
import select
from edge import *

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
c = socket.socket()
c.setblocking(False)
r = c.connect_ex(("127.0.0.1", port))
out("connect", errno.errorcode.get(r, r) if r in (errno.EINPROGRESS, errno.ECONNREFUSED) else r)
p = select.poll()
p.register(c, select.POLLOUT)
out("poll", sorted(n for n, v in (("OUT", select.POLLOUT), ("ERR", select.POLLERR), ("HUP", select.POLLHUP))
                   if any(m & v for _, m in p.poll(10000))))
out("SO_ERROR", errno.errorcode.get(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
c2 = socket.socket()
attempt("blocking connect", lambda: c2.connect(("127.0.0.1", port)))
done()
