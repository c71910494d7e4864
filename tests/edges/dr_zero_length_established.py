# Sends and receives of zero bytes on a connection that has carried a byte each way: on an
# empty connection and with data waiting, which they leave where it is.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for x in (a, c):
    x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
c.sendall(b"1")
attempt("server got", lambda: a.recv(1))
a.sendall(b"2")
attempt("client got", lambda: c.recv(1))
zero_length_calls(c, a)
done()
