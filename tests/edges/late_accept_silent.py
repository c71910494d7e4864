# A client connects and waits in recv without sending; the server accepts 2.5 s later and
# speaks first (a banner), as SMTP and SSH servers do.
# sdp-conns: 2
import time
from edge import *

srv = listener()
pid = os.fork()
if pid == 0:
    time.sleep(2.5)  # the scenario: a busy server
    a, _ = srv.accept()
    a.sendall(b"220 ready\r\n")
    a.settimeout(20)
    a.sendall(a.recv(10).upper())
    a.close()
    sys.exit(0)
c = socket.create_connection(srv.getsockname())
c.settimeout(30)
attempt("banner", lambda: c.recv(20))
c.sendall(b"helo")
attempt("reply", lambda: c.recv(10))
attempt("then", lambda: c.recv(10))
os.waitpid(pid, 0)
done()
