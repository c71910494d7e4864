# Edge-triggered epoll (EPOLLET): one event per arrival of data, none while nothing new
# comes even with data left unread, and a new one for the next arrival; level-triggered
# beside it keeps reporting the unread data.
# sdp-conns: 2
import select
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setblocking(False)
et = select.epoll()
et.register(a.fileno(), select.EPOLLIN | select.EPOLLET)
lt = select.epoll()
lt.register(a.fileno(), select.EPOLLIN)
out("fresh et", et.poll(0), "lt", lt.poll(0))
c.sendall(b"abcdef")
out("et after data", [m for _, m in et.poll(10)])
out("et again", et.poll(0))
out("lt", [m for _, m in lt.poll(0)])
attempt("read 2", lambda: a.recv(2))
out("et after partial read", et.poll(0))
out("lt after partial read", [m for _, m in lt.poll(0)])
c.sendall(b"gh")
out("et after more data", [m for _, m in et.poll(10)])
out("et again", et.poll(0))
attempt("read all", lambda: a.recv(100))
attempt("read empty", lambda: a.recv(100))
out("et after draining", et.poll(0), "lt", lt.poll(0))
et.modify(a.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLET)
out("et modified to IN|OUT", [m for _, m in et.poll(10)])
out("et again", et.poll(0))
c.sendall(b"ij")
ev = et.poll(10)
out("et after data, IN|OUT", [m for _, m in ev])
out("et again", et.poll(0))
attempt("read", lambda: a.recv(100))
done()
