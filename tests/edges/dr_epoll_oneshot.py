# EPOLLONESHOT: one event, then none for new data until the descriptor is rearmed with
# EPOLL_CTL_MOD, which reports the data still unread at once.
# sdp-conns: 2
import select
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
ep = select.epoll()
ep.register(a.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
c.sendall(b"one")
out("first", [m for _, m in ep.poll(10)])
c.sendall(b"two")
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("recv waitall", lambda: a.recv(6, socket.MSG_WAITALL))
c.sendall(b"three")
attempt("peek waitall", lambda: a.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL))
out("disarmed, data waiting", ep.poll(0))
ep.modify(a.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
out("rearmed", [m for _, m in ep.poll(10)])
out("after", ep.poll(0))
attempt("recv", lambda: a.recv(10))
done()
