# A listener with backlog 1 and three clients that start connecting before the server accepts
# (the queue holds fewer): the server then accepts all three (in a thread, a thread for each), each client's
# connect completes, and each request is read and answered.
# sdp-conns: 6
from edge import *

backlog_clients(3)
done()
