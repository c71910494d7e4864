# SO_RCVLOWAT 10: poll does not report 5 bytes as readable, reports 10; a blocking recv waits
# for 10 bytes written in three pieces by a thread.
# sdp-conns: 2
import select
import struct
import threading
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 10)
out("SO_RCVLOWAT", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))
p = select.poll()
p.register(a, select.POLLIN)
c.sendall(b"12345")
out("5 bytes, poll 300 ms", p.poll(300))
c.sendall(b"67890")
out("10 bytes, poll", [m for _, m in p.poll(10000)])
attempt("recv", lambda: a.recv(100))


def pieces():
    for part in (b"abc", b"def", b"ghij"):
        c.sendall(part)


t = threading.Thread(target=pieces)
t.start()
attempt("blocking recv, low-water mark 10", lambda: a.recv(100))
t.join(10)
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
c.sendall(b"z")
out("low-water mark 1, poll", [m for _, m in p.poll(10000)])
attempt("recv", lambda: a.recv(100))
done()
