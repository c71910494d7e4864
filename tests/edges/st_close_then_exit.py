# A forked child sends a request on an established connection, closes it and leaves by
# _exit() (no atexit handlers, as a forked C child does): the parent reads the request, then
# end of stream.
# The child's _exit() skips the exit statistics, so only the parent's end is counted.
# sdp-conns: 1
from edge import *

srv = listener()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    c = socket.create_connection(srv.getsockname())
    os.read(r, 1)  # the parent has accepted
    c.sendall(b"from the child")
    c.close()
    os._exit(0)
a, _ = srv.accept()
os.write(w, b"a")
a.settimeout(10)
attempt("server read", lambda: read_to_end(a))
out("child exit", os.waitpid(pid, 0)[1])
done()
