# makefile() on both ends: lines written and flushed by one are read one by one by the other,
# by readline, iteration and read(n); the reader's file sees end of stream after SHUT_WR.
# sdp-conns: 2
from edge import *

srv = listener()
c, a = accepted(srv)
w = c.makefile("w", encoding="ascii", newline="\n")
r = a.makefile("rb")
w.write("first line\n")
w.flush()
attempt("readline", lambda: r.readline())
w.write("second\nthird\n")
w.write("fourth\n")
w.flush()
attempt("readline", lambda: r.readline())
attempt("readline", lambda: r.readline())
attempt("read 3", lambda: r.read(3))
attempt("readline rest", lambda: r.readline())
for i in range(100):
    w.write("line %d\n" % i)
w.write("no newline at end")
w.flush()
w.close()
c.shutdown(socket.SHUT_WR)
lines = list(r)
out("lines", len(lines), lines[0], lines[99], lines[-1])
attempt("readline at end", lambda: r.readline())
rw = a.makefile("rwb")
rw.write(b"reply\n")
rw.flush()
cr = c.makefile("rb")
attempt("client readline", lambda: cr.readline())
done()
