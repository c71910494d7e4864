# SO_SNDTIMEO on a connection whose peer does not read: the writer's sends fill the buffers,
# then one fails with EAGAIN once the 0.2 s timeout expires. The reader makes no call at all,
# so only the writer's end is taken over SDP by an engine.
# sdp-conns: 1
import struct
import time
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 200000))
t = time.time()
try:
    for i in range(2000):
        c.send(b"z" * 65536)
    out("no error")
except OSError as e:
    out("send error", err(e))
out("took < 3s", time.time() - t < 3)
done()
