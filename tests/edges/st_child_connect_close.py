# A forked child connects and closes at once without a byte, and exits; the parent accepts
# after the child exited. Then a child that sends a request and closes once the parent has
# accepted: the parent reads the request and end of stream.
# sdp-conns: 2
from edge import *

srv = listener()
pid = os.fork()
if pid == 0:
    socket.create_connection(srv.getsockname()).close()
    sys.exit(0)
out("child exit", os.waitpid(pid, 0)[1])
a, _ = srv.accept()
a.settimeout(10)
out("server read", read_to_end(a))
attempt("send", lambda: a.send(b"late"))
a.close()
pid, a = child_sends_and_closes(srv, sys.exit)
out("server read", read_to_end(a))
out("child exit", os.waitpid(pid, 0)[1])
done()
