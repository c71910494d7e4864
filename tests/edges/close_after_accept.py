# The server has accepted; the client, in another process, closes without a byte. The
# server reads end of stream, and its first write is accepted, as over TCP.
# sdp-conns: 0
from edge import *

srv = listener()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    c = socket.create_connection(srv.getsockname())
    os.read(r, 1)  # the server has accepted
    c.close()
    sys.exit(0)
a, _ = srv.accept()
os.write(w, b"a")
os.waitpid(pid, 0)
a.settimeout(10)
attempt("recv", lambda: a.recv(10))
attempt("send", lambda: a.send(b"hello\n"))
done()
