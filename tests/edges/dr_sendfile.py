# socket.sendfile and os.sendfile of a 100,000-byte file, with an offset and count, and of an
# empty file; the reader gets exactly the bytes, in order.
# sdp-conns: 2
import hashlib
import struct
import tempfile
import threading
from edge import *

data = bytes((i * 7 + i // 256) % 256 for i in range(100000))
f = tempfile.TemporaryFile()
f.write(data)
f.flush()
empty = tempfile.TemporaryFile()
srv = listener()
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
got = []
t = threading.Thread(target=lambda: got.append(read_to_end(a)))
t.start()
f.seek(0)
attempt("socket.sendfile", lambda: c.sendfile(f))
attempt("socket.sendfile offset 1000 count 500", lambda: c.sendfile(f, 1000, 500))
attempt("socket.sendfile empty", lambda: c.sendfile(empty))
attempt("os.sendfile empty", lambda: os.sendfile(c.fileno(), empty.fileno(), 0, 100))
sent = 0
while True:
    n = os.sendfile(c.fileno(), f.fileno(), 99000 + sent, 2000 - sent)
    if n == 0:
        break
    sent += n
out("os.sendfile of 2000 at 99000, to the file's end", sent)
c.shutdown(socket.SHUT_WR)
t.join(10)
want = data + data[1000:1500] + data[99000:]
out("received", len(got[0]), "as sent", hashlib.sha256(got[0]).digest() == hashlib.sha256(want).digest())
done()
