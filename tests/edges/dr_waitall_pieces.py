# MSG_WAITALL while the data arrives in pieces: a forked child holding the connection writes
# 30 bytes in 3 writes, then 5 more and exits; the reader gets 30 at once, then the 5 at end
# of stream.
# sdp-conns: 2
import struct
import time
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
pid = os.fork()
if pid == 0:
    a.close()
    for part in (b"0123456789", b"abcdefghij", b"ABCDEFGHIJ"):
        c.sendall(part)
        time.sleep(0.05)  # spreads the pieces; what the reader sees does not depend on it
    c.sendall(b"tail!")
    c.close()
    sys.exit(0)
c.close()
attempt("waitall 30", lambda: a.recv(30, socket.MSG_WAITALL))
attempt("waitall 10 at end", lambda: a.recv(10, socket.MSG_WAITALL))
attempt("recv", lambda: a.recv(10))
_, status = os.waitpid(pid, 0)
out("child exit", os.waitstatus_to_exitcode(status))
done()
