# A socket registered with epoll (EPOLLOUT) while its non-blocking connect is under way: the
# event comes once connected, SO_ERROR is 0; then EPOLLIN for the server's answer.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c = connect_nonblocking(srv.getsockname())
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLOUT)
ev = ep.poll(10)
out("connect event", [m for _, m in ev])
out("SO_ERROR", c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
attempt("send", lambda: c.send(b"hi"))
srv.settimeout(10)
a, _ = srv.accept()
a.settimeout(10)
attempt("server got", lambda: a.recv(2))
ep.modify(c.fileno(), select.EPOLLIN)
out("before the answer", ep.poll(0))
a.sendall(b"yes")
out("after the answer", [m for _, m in ep.poll(10)])
attempt("client got", lambda: c.recv(10))
done()
