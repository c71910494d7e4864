# A forked child connects and closes at once, one time without a byte and one time after a
# request; the parent accepts both after the child exited. The child leaves by os._exit, then
# the same again with sys.exit.
# sdp-conns: 0
from edge import *

srv = listener()
for leave, data in [(lv, d) for lv in (os._exit, sys.exit) for d in (b"", b"from the child")]:
    pid = os.fork()
    if pid == 0:
        c = socket.create_connection(srv.getsockname())
        if data:
            c.sendall(data)
        c.close()
        leave(0)
    _, status = os.waitpid(pid, 0)
    out("child exit", status)
    a, _ = srv.accept()
    a.settimeout(10)
    out("server read", read_to_end(a))
    attempt("send", lambda: a.send(b"late"))
    a.close()
done()
