# SO_LINGER {1, 5} on a client that sends 1 MiB and closes while the server still reads: close
# returns once the bytes are delivered, well within the 5 s; the server reads all of them and
# end of stream.
# sdp-conns: 2
import hashlib
import struct
import threading
import time
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
data = os.urandom(1 << 20)
res = []
t = threading.Thread(target=lambda: res.append(read_to_end(a)))
t.start()
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 5))
c.sendall(data)
t0 = time.monotonic()
c.close()
out("close within 4 s", time.monotonic() - t0 < 4)
t.join(10)
out("server read all", len(res[0]) == len(data) and hashlib.sha256(res[0]).digest() == hashlib.sha256(data).digest())
attempt("server send", lambda: a.send(b"x"))
done()
