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


def listener(backlog=8):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def done():
    out("end")
    sys.stdout.flush()
    sys.exit(0)
