# A listener with backlog 1 and two clients that start connecting before the server accepts
# (the kernel's queue holds backlog + 1): the server then accepts both (in a thread, a thread
# for each connection), each client's connect completes, each request is read and answered.
# sdp-conns: 4
from edge import *

backlog_clients(2)
done()
