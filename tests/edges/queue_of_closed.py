# A listener's queue holding three connections closed before accept and one that sent data.
# sdp-conns: 2
from edge import *

srv = listener()
for _ in range(3):
    socket.create_connection(srv.getsockname()).close()
live = socket.create_connection(srv.getsockname())
live.sendall(b"x")
got = []
for _ in range(4):
    a, _ = srv.accept()
    a.settimeout(10)
    try:
        got.append(a.recv(10))
    except OSError as e:
        got.append(err(e))
out("reads", sorted(map(repr, got)))
done()
