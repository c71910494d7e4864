# poll and select on an established connection: writable only when fresh, readable and
# writable once data came, writable only again once it is read; both ends.
# sdp-conns: 2
import select
from edge import *

POLL = [("IN", select.POLLIN), ("PRI", select.POLLPRI), ("OUT", select.POLLOUT),
        ("ERR", select.POLLERR), ("HUP", select.POLLHUP), ("RDHUP", 0x2000)]


def poll(s, timeout=0, mask=select.POLLIN | select.POLLPRI | select.POLLOUT | 0x2000):
    p = select.poll()
    p.register(s, mask)
    return ["|".join(n for n, v in POLL if m & v) for _, m in p.poll(timeout)]


def sel(s):
    r, w, x = select.select([s], [s], [s], 0)
    return (len(r), len(w), len(x))


srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
out("fresh server", poll(a), sel(a))
out("fresh client", poll(c), sel(c))
out("server, POLLIN only, 100 ms", poll(a, 100, select.POLLIN))
c.sendall(b"data")
out("server waits for POLLIN", poll(a, 10000, select.POLLIN))
out("server with data", poll(a), sel(a))
out("client after sending", poll(c), sel(c))
out("read", a.recv(10))
out("server after reading", poll(a), sel(a))
a.sendall(b"back")
out("client waits for POLLIN", poll(c, 10000, select.POLLIN))
out("client with data", poll(c), sel(c))
out("read", c.recv(10))
out("client after reading", poll(c), sel(c))
done()
