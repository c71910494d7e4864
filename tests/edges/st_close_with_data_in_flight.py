# The client sendall()s 4 MiB and closes at once, while the server (a thread) is still reading:
# every byte arrives, then end of stream.
# sdp-conns: 2
import hashlib
import threading
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.settimeout(10)
data = os.urandom(4 << 20)
res = []
t = threading.Thread(target=lambda: res.append(read_to_end(a)))
t.start()
c.sendall(data)
c.close()
t.join(20)
out("server read all", bool(res) and hashlib.sha256(res[0]).digest() == hashlib.sha256(data).digest())
attempt("server send after", lambda: a.send(b"x"))
done()
