# A server writes 8 MiB, non-blocking, to a client that reads slowly, then closes and exits at
# once: every byte send() accepted arrives, as the kernel delivers them for an exited process.
# sdp-conns: 2
import hashlib
import select
import time
from edge import *

N = 8 << 20
data = bytes(range(256)) * (N // 256)
srv = listener()
addr = srv.getsockname()
pid = os.fork()
if pid == 0:
    a, _ = srv.accept()
    a.recv(2)
    a.setblocking(False)  # an event loop's writes: what send() takes, then wait for room
    p = select.poll()
    p.register(a, select.POLLOUT)
    off = 0
    while off < N:
        try:
            off += a.send(data[off:off + (1 << 20)])
        except BlockingIOError:
            p.poll(30000)
    a.close()
    sys.exit(0)
srv.close()
c = socket.create_connection(addr)
c.sendall(b"go")
c.settimeout(30)
h, got = hashlib.sha256(), 0
while True:
    d = c.recv(64 << 10)
    if not d:
        break
    h.update(d)
    got += len(d)
    time.sleep(0.005)  # the scenario: a slow reader
os.waitpid(pid, 0)
out("read", got, "intact", h.digest() == hashlib.sha256(data).digest())
done()
