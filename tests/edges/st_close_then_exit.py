# A forked child sends a request on an established connection, closes it and leaves by
# _exit() (no atexit handlers, as a forked C child does): the parent reads the request, then
# end of stream.
# The child's _exit() skips the exit statistics, so only the parent's end is counted.
# sdp-conns: 1
from edge import *

srv = listener()
pid, a = child_sends_and_closes(srv, os._exit)
attempt("server read", lambda: read_to_end(a))
out("child exit", os.waitpid(pid, 0)[1])
done()
