# The server waits in accept (a thread) before any client connects; a client connects and sends
# at once; accept returns it, the request is read and answered; a second accept, waiting
# again, takes a client that closes without a byte.
# sdp-conns: 2
import threading
from edge import *

srv = listener()
got = []


def server():
    for _ in range(2):
        a, _ = srv.accept()
        a.settimeout(10)
        req = a.recv(20)
        got.append(req)
        if req:
            a.sendall(b"re: " + req)
        a.close()


t = threading.Thread(target=server, daemon=True)
t.start()
t.join(0.2)
out("server waiting", t.is_alive())
c = socket.create_connection(srv.getsockname())
c.settimeout(10)
c.sendall(b"hello")
out("client read", read_to_end(c))
socket.create_connection(srv.getsockname()).close()
t.join(10)
out("server done", not t.is_alive(), got)
done()
