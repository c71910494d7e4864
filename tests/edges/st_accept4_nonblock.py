# accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, and accept on a non-blocking listener: EAGAIN on
# an empty queue; after a connection, the new socket's flags, and a request read without
# blocking once poll says it is there.
# sdp-conns: 4
import ctypes
import fcntl
import select
from edge import *

libc = ctypes.CDLL(None, use_errno=True)
srv = listener()
srv.setblocking(False)
attempt("accept empty", srv.accept)


def accept4(flags):
    fd = libc.accept4(srv.fileno(), None, None, flags)
    if fd < 0:
        e = ctypes.get_errno()
        return "error " + errno.errorcode.get(e, str(e))
    return fd


out("accept4 empty", accept4(socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC))
c = socket.create_connection(srv.getsockname())
select.select([srv], [], [], 10)
fd = accept4(socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
out("accept4 returns an fd", isinstance(fd, int))
out("non-blocking", not os.get_blocking(fd), "close-on-exec", bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
a = socket.socket(fileno=fd)
attempt("recv nothing yet", lambda: a.recv(10))
c.sendall(b"request")
select.select([a], [], [], 10)
attempt("recv", lambda: a.recv(10))
attempt("send", lambda: a.send(b"answer"))
c.settimeout(10)
attempt("client recv", lambda: c.recv(10))
c2 = socket.create_connection(srv.getsockname())
select.select([srv], [], [], 10)
fd = accept4(0)
out("accept4 0: blocking", os.get_blocking(fd), "close-on-exec", bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
b = socket.socket(fileno=fd)
b.settimeout(10)
c2.sendall(b"second")
attempt("recv", lambda: b.recv(10))
out("accept empty again", accept4(socket.SOCK_NONBLOCK))
done()
