# A client sends 5 bytes, then closes with SO_LINGER {1, 0}; the server, which made no call
# on the connection since accept, reads afterwards: the bytes, then the reset.
# sdp-conns: 2
import struct
import time
from edge import *

srv = listener()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    c = socket.create_connection(srv.getsockname())
    c.sendall(b"hello")
    time.sleep(0.3)  # the scenario: the bytes are on their way, the server busy
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    os.write(w, b"x")
    sys.exit(0)
a, _ = srv.accept()
a.settimeout(10)
os.read(r, 1)
attempt("server recv", lambda: a.recv(10))
attempt("server recv", lambda: a.recv(10))
attempt("server recv", lambda: a.recv(10))
os.waitpid(pid, 0)
done()
