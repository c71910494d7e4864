# A thread is blocked in recv when the other end closes: after an orderly close it reads end
# of stream; after an abortive close (SO_LINGER {1, 0}) it reads the reset.
# sdp-conns: 4
import struct
import threading
from edge import *

srv = listener()
for abort in (False, True):
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    a.settimeout(10)
    c.sendall(b"hello")
    attempt("server recv", lambda: a.recv(5))
    res = []

    def reader():
        for _ in range(2):
            try:
                res.append(a.recv(10))
            except OSError as e:
                res.append(err(e))
    t = threading.Thread(target=reader)
    t.start()
    t.join(0.3)
    out("reader blocked", t.is_alive())
    if abort:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    t.join(10)
    out("abortive" if abort else "orderly", "reader got", res)
done()
