# Full duplex: each end sends 1 MiB by sendall in a thread while its main thread reads the
# other's 1 MiB; neither waits for the other to finish first.
# sdp-conns: 2
import hashlib
import struct
import threading
from edge import *

MiB = 1 << 20
up = bytes((i * 31 + 7) % 251 for i in range(MiB))
down = bytes((i * 17 + 3) % 241 for i in range(MiB))
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
    x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
results = {}


def send(s, data, name):
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        results[name] = "sent"
    except OSError as e:
        results[name] = err(e)


def read(s, name):
    try:
        results[name] = read_to_end(s)
    except OSError as e:
        results[name] = err(e)


threads = [threading.Thread(target=send, args=(c, up, "client send")),
           threading.Thread(target=send, args=(a, down, "server send")),
           threading.Thread(target=read, args=(c, "client read"))]
for t in threads:
    t.start()
read(a, "server read")
for t in threads:
    t.join(20)
out("client send", results.get("client send"), "server send", results.get("server send"))
for name, want in (("server read", up), ("client read", down)):
    got = results.get(name)
    if isinstance(got, bytes):
        out(name, len(got), "as sent", hashlib.sha256(got).digest() == hashlib.sha256(want).digest())
    else:
        out(name, got)
done()
