# O_NONBLOCK set and cleared with fcntl on an established connection: EAGAIN while set, a
# blocking read once cleared (a thread sends meanwhile), flags read back each time.
# sdp-conns: 2
import fcntl
import struct
import threading
from edge import *


def nonblock(s):
    return bool(fcntl.fcntl(s, fcntl.F_GETFL) & os.O_NONBLOCK)


def set_nonblock(s, on):
    fl = fcntl.fcntl(s, fcntl.F_GETFL)
    fcntl.fcntl(s, fcntl.F_SETFL, fl | os.O_NONBLOCK if on else fl & ~os.O_NONBLOCK)


srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
out("accepted O_NONBLOCK", nonblock(a))
set_nonblock(a, True)
out("O_NONBLOCK", nonblock(a))
attempt("recv", lambda: a.recv(10))
attempt("os.read", lambda: os.read(a.fileno(), 10))
c.sendall(b"first")
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
set_nonblock(a, False)
attempt("peek", lambda: a.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL))
set_nonblock(a, True)
attempt("recv non-blocking", lambda: a.recv(10))
attempt("recv non-blocking again", lambda: a.recv(10))
set_nonblock(a, False)
out("O_NONBLOCK", nonblock(a))
t = threading.Thread(target=lambda: c.sendall(b"second"))
t.start()
attempt("recv waitall blocking", lambda: a.recv(6, socket.MSG_WAITALL))
t.join(10)
attempt("os.write", lambda: os.write(a.fileno(), b"back"))
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
attempt("client got", lambda: c.recv(10))
set_nonblock(c, True)
attempt("client recv non-blocking", lambda: c.recv(10))
done()
