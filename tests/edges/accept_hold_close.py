# The server accepts, holds the connection without a call on it, and closes; the client,
# blocked in recv meanwhile, reads end of stream.
# sdp-conns: 0
import threading
import time
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
c.settimeout(10)
a, _ = srv.accept()
got = []
t = threading.Thread(target=lambda: got.append(c.recv(10)))
t.start()
time.sleep(1)  # the scenario: a server that holds the connection without a call on it
a.close()
t.join(15)
out("client got", got)
attempt("client send", lambda: c.send(b"x"))
done()
