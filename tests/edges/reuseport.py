# Two listeners share a port by SO_REUSEPORT (nginx's reuseport, pre-fork and multi-threaded
# servers): the kernel spreads 40 connections over both.
# sdp-conns: 80
from edge import *

a = socket.socket()
a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
a.bind(("127.0.0.1", sdp_free_port()))
a.listen(64)
b = socket.socket()
b.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
b.bind(a.getsockname())
b.listen(64)
clients = [socket.create_connection(a.getsockname()) for _ in range(40)]
got = {a: [], b: []}
for l in (a, b):
    l.setblocking(False)
    while True:
        try:
            s, _ = l.accept()
        except BlockingIOError:
            break
        s.setblocking(True)
        got[l].append(s)
out("accepted", len(got[a]) + len(got[b]), "by both", bool(got[a]) and bool(got[b]))
for c in clients:
    c.sendall(b"x")
echoed = 0
for s in got[a] + got[b]:
    s.settimeout(10)
    s.sendall(s.recv(1))
for c in clients:
    c.settimeout(10)
    echoed += len(c.recv(1))
out("echoed", echoed)
done()
