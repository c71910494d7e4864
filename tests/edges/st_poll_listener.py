# Readiness of a listener by select, poll and epoll: not readable with an empty queue,
# readable once a client connected, not readable again once it was accepted.
# sdp-conns: 2
import select
from edge import *


def ready(srv, timeout):
    r, _, _ = select.select([srv], [], [], timeout)
    p = select.poll()
    p.register(srv, select.POLLIN | select.POLLOUT)
    pev = p.poll(timeout * 1000)
    ep = select.epoll()
    ep.register(srv.fileno(), select.EPOLLIN | select.EPOLLOUT)
    eev = ep.poll(timeout)
    ep.close()
    return (bool(r), [m == select.POLLIN for _, m in pev], [m == select.EPOLLIN for _, m in eev])


srv = listener()
out("empty", ready(srv, 0))
c = socket.create_connection(srv.getsockname())
out("one queued", ready(srv, 10))
ep = select.epoll()
ep.register(srv.fileno(), select.EPOLLIN | select.EPOLLET)
out("edge-triggered", len(ep.poll(10)), len(ep.poll(0)))
a, _ = srv.accept()
out("accepted", ready(srv, 0))
c2 = socket.create_connection(srv.getsockname())
out("edge-triggered after a new one", len(ep.poll(10)))
b, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
c.sendall(b"x")
attempt("server recv", lambda: a.recv(1))
done()
