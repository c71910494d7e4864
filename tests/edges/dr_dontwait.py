# MSG_DONTWAIT on a blocking socket: EAGAIN while the connection is empty, the data once it
# is there, EAGAIN again after it; the socket itself stays blocking.
# sdp-conns: 2
import fcntl
import select
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
attempt("recv dontwait empty", lambda: a.recv(10, socket.MSG_DONTWAIT))
attempt("peek dontwait empty", lambda: a.recv(10, socket.MSG_DONTWAIT | socket.MSG_PEEK))
attempt("client recv dontwait empty", lambda: c.recv(10, socket.MSG_DONTWAIT))
attempt("send dontwait", lambda: c.send(b"data", socket.MSG_DONTWAIT))
p = select.poll()
p.register(a, select.POLLIN)
out("readable", bool(p.poll(10000)))
attempt("recv dontwait", lambda: a.recv(10, socket.MSG_DONTWAIT))
attempt("recv dontwait again", lambda: a.recv(10, socket.MSG_DONTWAIT))
out("O_NONBLOCK", bool(fcntl.fcntl(a, fcntl.F_GETFL) & os.O_NONBLOCK))
c.sendall(b"blocking")
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("recv waitall", lambda: a.recv(8, socket.MSG_WAITALL))
done()
