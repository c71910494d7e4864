"""Helpers of the differential edge scenarios: each scenario prints what a program observes
(return values, errno names, bytes, readiness), run once over plain TCP and once preloaded;
tests/edges_test.go compares the two. Nothing here knows what the answer should be."""
import errno
import os
import socket
import sys


def out(*words):
    print(*words, flush=True)


def err(e):
    """The errno name of an OSError (timeouts included), else its type."""
    if isinstance(e, socket.timeout) and not getattr(e, "errno", None):
        return "timeout"
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


def attempt(what, f):
    """Prints what f returned, or the errno it failed with."""
    try:
        out(what, repr(f()))
    except Exception as e:  # noqa: BLE001 - the errno is the observation
        out(what, "error", err(e))


def sdp_free_port():
    """A port P, chosen by the kernel, whose SDP port (P + SDP_PORT_OFFSET, wrapped) is free
    too: a preloaded listener on P needs both, and tests running side by side hold many ports
    (an SDP port that is busy leaves the listener TCP only, which this suite is not about)."""
    off = int(os.environ.get("SDP_PORT_OFFSET", "20000"))
    for _ in range(500):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", ((port - 1024 + off) % 64512) + 1024))
            return port
        except OSError:
            continue
        finally:
            probe.close()
            s.close()
    raise RuntimeError("no port whose SDP port is free")


def read_to_end(sock):
    """Everything sock receives until end of stream."""
    got = b""
    while True:
        d = sock.recv(65536)
        if not d:
            return got
        got += d


def connect_nonblocking(addr):
    """A socket whose non-blocking connect to addr is under way (or done)."""
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(addr)
    except (BlockingIOError, InterruptedError):
        pass
    return c


def listener(backlog=8):
    s = socket.socket()
    s.bind(("127.0.0.1", sdp_free_port()))
    s.listen(backlog)
    return s


def done():
    out("end")
    sys.stdout.flush()
    sys.exit(0)
