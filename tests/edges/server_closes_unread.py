# The server accepts, keeps the connection a while without a call on it and closes it; the
# client, blocked in recv, reads end of stream (not a reset).
# sdp-conns: 0
import time
from edge import *

srv = listener()
pid = os.fork()
if pid == 0:
    a, _ = srv.accept()
    time.sleep(1)  # the scenario: a server busy elsewhere
    a.close()
    sys.exit(0)
c = socket.create_connection(srv.getsockname())
c.settimeout(20)
attempt("recv", lambda: c.recv(10))
os.waitpid(pid, 0)
done()
