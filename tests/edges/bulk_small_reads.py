# A blocking sendall of 2 MiB read by blocking receives of 64 KiB at a time (both sockets
# blocking, no timeout): the reader gets every byte, then end of stream after close.
# sdp-conns: 2
import hashlib
import threading
from edge import *

data = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(2 << 20))
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
sent = []


def server():
    a.sendall(data)
    sent.append(len(data))
    a.close()


t = threading.Thread(target=server, daemon=True)
t.start()
buf = bytearray(65536)
h, got = hashlib.sha256(), 0
while True:
    k = c.recv_into(buf)
    if not k:
        break
    h.update(buf[:k])
    got += k
t.join(30)
out("sender finished", sent)
out("reader got", got, "bytes, intact:", h.digest() == hashlib.sha256(data).digest())
c.close()
done()
