# What a non-blocking send takes follows bytes, not a count of SDP buffers. First, while the
# reader reads nothing, 100-byte sends until one is refused: TCP takes far more than 64 KiB.
# Then the reader takes 1 KiB at a time while the sender writes 10 MiB (each call offers all
# that is left), waiting for EPOLLOUT whenever a send is refused; as soon as the last part is
# accepted it sends 1 more byte, which TCP takes. The reader checks every byte.
# sdp-conns: 2
import hashlib
import select
import threading
from edge import *

small = b"s" * 100
total = 10 << 20
bulk = bytes((i * 13 + (i >> 9)) & 0xFF for i in range(total)) + b"!"
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
c.setblocking(False)
taken = 0
for _ in range(100000):
    try:
        taken += c.send(small)
    except BlockingIOError:
        break
out("small sends taken before EAGAIN exceed 64 KiB", taken > 65536)
got = []


def reader():
    h, n = hashlib.sha256(), 0
    want = taken
    while True:
        d = a.recv(1024)
        if not d:
            break
        if want:
            skip = min(want, len(d))
            want -= skip
            d = d[skip:]
        h.update(d)
        n += len(d)
    got.append((n, h.hexdigest() == hashlib.sha256(bulk).hexdigest()))


t = threading.Thread(target=reader)
t.start()
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLOUT | select.EPOLLET)
off, waits_ok = 0, True
for _ in range(100000):
    if off >= total:
        break
    try:
        off += c.send(memoryview(bulk)[off:total])
    except BlockingIOError:
        if not ep.poll(10):
            waits_ok = False
            break
out("sent", off, "every wait ended by EPOLLOUT", waits_ok)
attempt("one more byte", lambda: c.send(bulk[total:]))
c.setblocking(True)
c.close()
t.join(30)
out("reader got", got)
done()
