# A forked client connects and leaves without closing, once by os._exit and once by sys.exit,
# after the server accepted; the server then reads and writes.
# sdp-conns: 0
import os, sys
from edge import *
for how in ("_exit", "exit"):
    srv = listener()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        c = socket.create_connection(srv.getsockname())
        os.read(r, 1)  # the server accepted
        if how == "_exit":
            os._exit(0)
        sys.exit(0)
    a, _ = srv.accept()
    os.write(w, b"x")
    os.waitpid(pid, 0)
    a.settimeout(10)
    attempt(how + ": server recv", lambda: a.recv(10))
    attempt(how + ": server send", lambda: a.send(b"hello"))
    a.close(); srv.close()
done()
