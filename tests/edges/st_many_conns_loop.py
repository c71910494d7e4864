# 20 connections one after another, each carrying one request and one response, then closed by
# the client (a client without keep-alive); the server reads end of stream on each. The first 8
# go over SDP (16 ends); after 8 that each carried little, the client's next ones there go over
# plain TCP (SDP_SHORT_TCP), and the output is the same either way.
# sdp-conns: 16
from edge import *

srv = listener()
results = []
for i in range(20):
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    for x in (a, c):
        x.settimeout(10)
    c.sendall(b"request %d" % i)
    req = a.recv(20)
    a.sendall(b"response to " + req)
    got = c.recv(40)
    c.close()
    eof = a.recv(10)
    a.close()
    results.append((got == b"response to request %d" % i, eof))
out("all answered", all(r[0] for r in results))
out("ends of stream", sorted(set(r[1] for r in results)))
done()
