# A blocking receive's SO_RCVTIMEO follows every change, made with setsockopt or with
# syscall(SYS_setsockopt) around libc: none (the receive waits for data that comes later), then
# 0.2 s (it times out), then none again and 0.2 s again through the raw system call.
# sdp-conns: 2
import ctypes
import struct
import threading
import time
from edge import *

libc = ctypes.CDLL(None, use_errno=True)
SYS_setsockopt = 54  # x86_64


def raw_rcvtimeo(sock, usec):
    tv = ctypes.create_string_buffer(struct.pack("ll", 0, usec))
    if libc.syscall(SYS_setsockopt, sock.fileno(), socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv, 16) != 0:
        raise OSError(ctypes.get_errno(), "setsockopt")


def send_later(sock, data):
    def run():
        time.sleep(0.5)  # the receive below is waiting by then (if not, it finds the data: same)
        sock.sendall(data)
    t = threading.Thread(target=run)
    t.start()
    return t


srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
t = send_later(c, b"first")
attempt("recv, no timeout", lambda: a.recv(10))
t.join()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
attempt("recv, SO_RCVTIMEO 0.2", lambda: a.recv(10))
raw_rcvtimeo(a, 0)
t = send_later(c, b"second")
attempt("recv, none by syscall", lambda: a.recv(10))
t.join()
raw_rcvtimeo(a, 200000)
attempt("recv, 0.2 by syscall", lambda: a.recv(10))
out("SO_RCVTIMEO", struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)))
a.sendall(b"still")
c.settimeout(10)
attempt("client got", lambda: c.recv(10))
done()
