# As close_after_accept, with the client a thread of the server's process.
# sdp-conns: 0
import threading
from edge import *

srv = listener()
accepted, closed = threading.Event(), threading.Event()


def client():
    c = socket.create_connection(srv.getsockname())
    accepted.wait(10)
    c.close()
    closed.set()


t = threading.Thread(target=client)
t.start()
a, _ = srv.accept()
accepted.set()
closed.wait(10)
a.settimeout(10)
attempt("recv", lambda: a.recv(10))
attempt("send", lambda: a.send(b"hello\n"))
t.join()
done()
