# An event loop's echo with back-pressure and a small receive buffer: the server (SO_RCVBUF
# 64 KiB, non-blocking) reads only while its echo has gone, as node's socket.pipe(socket) does;
# the client's thread sends 8 MiB in mixed sizes and shuts down its side while its main thread
# reads the echo. Every byte comes back, in order; nothing waits for ever.
# sdp-conns: 2
import hashlib
import threading
from edge import *

data = bytes((i * 29 + 11) % 253 for i in range(8 << 20))
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
a.setblocking(False)
c.settimeout(20)
results = {}


def send():
    try:
        off, step = 0, 1
        while off < len(data):
            n = (step * 7919) % (200 << 10) + 1
            c.sendall(data[off:off + n])
            off += n
            step += 1
        c.shutdown(socket.SHUT_WR)
        results["send"] = "sent"
    except OSError as e:
        results["send"] = err(e)


def serve():
    pending = b""
    while True:
        if pending:
            _, w, _ = select.select([], [a], [], 20)
            if not w:
                return "stalled writing"
            pending = pending[a.send(pending):]
            continue
        r, _, _ = select.select([a], [], [], 20)
        if not r:
            return "stalled reading"
        d = a.recv(65536)
        if not d:
            a.shutdown(socket.SHUT_WR)
            return "echoed"
        pending = d


t = threading.Thread(target=send)
s = threading.Thread(target=lambda: results.__setitem__("serve", serve()))
t.start()
s.start()
try:
    got = read_to_end(c)
    out("client read", len(got), "as sent", hashlib.sha256(got).digest() == hashlib.sha256(data).digest())
except OSError as e:
    out("client read", err(e))
t.join(30)
s.join(30)
out("client send", results.get("send"), "server", results.get("serve"))
done()
