# A listener with backlog 1 and three clients that start connecting before the server accepts
# (the queue holds fewer): the server then accepts all three (in a thread, a thread for each), each client's
# connect completes, and each request is read and answered.
# sdp-conns: 6
import select
import threading
from edge import *

srv = listener(1)
addr = srv.getsockname()
clients = [connect_nonblocking(addr) for _ in range(3)]
got = []


def server():
    srv.settimeout(10)
    for _ in range(3):
        try:
            a, _ = srv.accept()
        except OSError as e:
            got.append(err(e))
            return
        threading.Thread(target=serve, args=(a,)).start()


def serve(a):
    a.settimeout(10)
    try:
        req = a.recv(20)
        got.append(req)
        a.sendall(b"ok " + req)
    except OSError as e:
        got.append(err(e))
    a.close()


t = threading.Thread(target=server)
t.start()
answers = []
for i, c in enumerate(clients):
    p = select.poll()
    p.register(c, select.POLLOUT)
    ev = p.poll(10000)
    c.setblocking(True)
    c.settimeout(10)
    out("client %d connected" % i, [m == select.POLLOUT for _, m in ev],
        errno.errorcode.get(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
    attempt("client %d sendall" % i, lambda: c.sendall(b"client %d" % i))
for c in clients:
    try:
        answers.append(read_to_end(c))
    except OSError as e:
        answers.append(err(e))
t.join(10)
out("server read", sorted(map(repr, got)))
out("clients read", sorted(map(repr, answers)))
done()
