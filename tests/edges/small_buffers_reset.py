# The application's buffer sizes are its back-pressure: a client with SO_SNDBUF 4 KiB sends
# 256 KiB to a server with SO_RCVBUF 4 KiB that reads 1 KiB and closes; the client's sendall
# fails with the server's reset (ECONNRESET or EPIPE, as it meets it) instead of "sending" it all.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.socket()
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
c.connect(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
pid = os.fork()
if pid == 0:
    c.close()
    a.settimeout(10)
    n = 0
    while n < 1024:
        n += len(a.recv(1024 - n))
    a.close()
    sys.exit(0)
a.close()
c.settimeout(10)
try:
    c.sendall(b"x" * (256 << 10))
    out("sendall", "all sent")
except OSError as e:
    out("sendall", "reset" if err(e) in ("ECONNRESET", "EPIPE") else err(e))
os.waitpid(pid, 0)
done()
