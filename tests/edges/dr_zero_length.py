# Sends and receives of zero bytes: on an empty connection and with data waiting, which they
# leave where it is.
# sdp-conns: 2
import struct
from edge import *

srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
zero_length_calls(c, a)
done()
