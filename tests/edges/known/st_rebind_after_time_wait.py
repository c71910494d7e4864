# A server (without SO_REUSEADDR) closes its connection first (its end waits in TIME_WAIT on the
# port) and its listener; then bind on the same port, without and with SO_REUSEADDR: both fail
# over TCP (the TIME_WAIT socket did not set SO_REUSEADDR).
# sdp-conns: 2
from edge import *

srv = listener()
addr = server_closes_first(srv)
s = socket.socket()
attempt("bind without SO_REUSEADDR", lambda: s.bind(addr))
s.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
attempt("bind with SO_REUSEADDR", lambda: s.bind(addr))
done()
