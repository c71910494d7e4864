# 1,000 sends of 10 bytes each, in one thread, before the peer reads any of them: all fit
# (10 KB), and the reader gets all 10,000 bytes in order.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
sent = 0
try:
    for i in range(1000):
        sent += c.send(b"%09d|" % i)
except OSError as e:
    out("send", i, "error", err(e))
out("sent", sent)
c.shutdown(socket.SHUT_WR)
got = read_to_end(a)
out("received", len(got), "in order", got == b"".join(b"%09d|" % i for i in range(1000)))
done()
