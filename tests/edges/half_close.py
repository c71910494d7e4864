# shutdown(SHUT_WR) each way: the other end reads to end of stream and still answers.
# sdp-conns: 2
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.settimeout(10)
c.sendall(b"question")
c.shutdown(socket.SHUT_WR)
got = b""
while True:
    d = a.recv(100)
    if not d:
        break
    got += d
out("server read", got)
a.sendall(b"answer")
a.shutdown(socket.SHUT_WR)
got = b""
while True:
    d = c.recv(100)
    if not d:
        break
    got += d
out("client read", got)
attempt("client send after both shut", lambda: c.send(b"late"))
done()
