# Both ends shut their sending sides at the same moment (two threads released together), each
# after sending a message; each reads the other's message and end of stream; then both close
# at once.
# sdp-conns: 2
import threading
from edge import *

srv = listener()
c, a = accepted(srv)
go = threading.Barrier(2, timeout=10)
res = {}


def end(name, s, msg):
    s.sendall(msg)
    go.wait()
    s.shutdown(socket.SHUT_WR)
    try:
        res[name] = read_to_end(s)
    except OSError as e:
        res[name] = err(e)
    go.wait()
    s.close()


t = threading.Thread(target=end, args=("client", c, b"from the client"))
t.start()
end("server", a, b"from the server")
t.join(10)
out("client read", res["client"])
out("server read", res["server"])
done()
