# One thread waits in accept while another closes the listener's descriptor: Linux does not
# wake the accept (the socket lives while the call holds it); a client that connects then is
# accepted by that waiting call.
# sdp-conns: 2
import threading
from edge import *

srv = listener()
addr = srv.getsockname()
res = []


def acceptor():
    try:
        a, _ = srv.accept()
        a.settimeout(10)
        res.append(a.recv(10))
        a.sendall(b"served")
        a.close()
    except OSError as e:
        res.append(err(e))


t = threading.Thread(target=acceptor, daemon=True)
t.start()
t.join(0.3)
out("accept waiting", t.is_alive())
os.close(srv.detach())
t.join(0.3)
out("accept still waiting after close", t.is_alive())
c = socket.socket()
c.settimeout(10)
attempt("connect", lambda: c.connect(addr))
try:
    c.sendall(b"late")
    out("client read", read_to_end(c))
except OSError as e:
    out("client", err(e))
t.join(10)
out("acceptor", not t.is_alive(), res)
done()
