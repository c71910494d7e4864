# A thread blocked in accept is woken by shutdown(SHUT_RDWR) on the listener (how some
# servers stop their accept threads): accept fails, later connects are refused.
# sdp-conns: 0
import threading
from edge import *

srv = listener()
addr = srv.getsockname()
res = []


def acceptor():
    try:
        res.append(srv.accept())
    except OSError as e:
        res.append(err(e))


t = threading.Thread(target=acceptor, daemon=True)
t.start()
# The thread is in accept once the listener's queue is seen empty by a connection that it
# takes: one connection proves the thread accepts, then it blocks again.
c = socket.create_connection(addr)
t.join(10)
out("first accept", type(res[0]).__name__)
res.clear()
t = threading.Thread(target=acceptor, daemon=True)
t.start()
t.join(0.3)
out("accept still blocked", t.is_alive())
attempt("listener SHUT_RDWR", lambda: srv.shutdown(socket.SHUT_RDWR))
t.join(10)
out("accept woken", not t.is_alive(), res)
c2 = socket.socket()
c2.settimeout(10)
attempt("connect after", lambda: c2.connect(addr))
done()
