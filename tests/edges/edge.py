"""Helpers of the differential edge scenarios: each scenario prints what a program observes
(return values, errno names, bytes, readiness), run once over plain TCP and once preloaded;
tests/edges_test.go compares the two. Nothing here knows what the answer should be."""
import errno
import os
import select
import socket
import sys
import threading


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


def accepted(srv):
    """A client connected to the listener srv and the server's end of it, both with 10 s
    timeouts: (c, a)."""
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    for x in (a, c):
        x.settimeout(10)
    return c, a


def server_closes_first(srv):
    """A connection to srv whose server end closes first, after a word each way (so that end
    waits in TIME_WAIT on the port); then the client closes and so does srv. Returns srv's
    address (st_*rebind*)."""
    addr = srv.getsockname()
    c, a = accepted(srv)
    c.sendall(b"bye?")
    attempt("server recv", lambda: a.recv(10))
    a.sendall(b"bye")
    a.close()
    out("client read", read_to_end(c))
    c.close()
    srv.close()
    return addr


def child_sends_and_closes(srv, leave):
    """A forked child connects to srv and, once the parent has accepted, sends a request,
    closes and leaves by leave (sys.exit or os._exit). Returns the child's pid and the
    parent's accepted socket (10 s timeout)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        c = socket.create_connection(srv.getsockname())
        os.read(r, 1)  # the parent has accepted
        c.sendall(b"from the child")
        c.close()
        leave(0)
    a, _ = srv.accept()
    os.write(w, b"a")
    a.settimeout(10)
    return pid, a


def done():
    out("end")
    sys.stdout.flush()
    sys.exit(0)


def backlog_clients(n):
    """A listener with backlog 1 and n clients that start connecting before the server accepts:
    the server accepts them all (in a thread, a thread for each connection), and each client
    sends a request and reads the answer (st_backlog1_*)."""
    srv = listener(1)
    addr = srv.getsockname()
    clients = [connect_nonblocking(addr) for _ in range(n)]
    got = []

    def server():
        srv.settimeout(10)
        for _ in range(n):
            try:
                a, _ = srv.accept()
            except OSError as e:
                got.append(err(e))
                return
            threading.Thread(target=serve, args=(a,)).start()

    def serve(a):
        a.settimeout(10)
        try:
            req = a.recv(20)
            got.append(req)
            a.sendall(b"ok " + req)
        except OSError as e:
            got.append(err(e))
        a.close()


    t = threading.Thread(target=server)
    t.start()
    answers = []
    for i, c in enumerate(clients):
        p = select.poll()
        p.register(c, select.POLLOUT)
        ev = p.poll(10000)
        c.setblocking(True)
        c.settimeout(10)
        out("client %d connected" % i, [m == select.POLLOUT for _, m in ev],
            errno.errorcode.get(c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
        attempt("client %d sendall" % i, lambda: c.sendall(b"client %d" % i))
    for c in clients:
        try:
            answers.append(read_to_end(c))
        except OSError as e:
            answers.append(err(e))
    t.join(10)
    out("server read", sorted(map(repr, got)))
    out("clients read", sorted(map(repr, answers)))


def child_closes_its_copy():
    """A connection in use (client c, server's end a, 10 s timeouts) whose client end a forked
    child closes before exiting: the server sees nothing, the parent goes on (st_fork_*).
    Returns (c, a)."""
    srv = listener()
    c, a = accepted(srv)
    c.sendall(b"before fork")
    attempt("server recv", lambda: a.recv(20))
    pid = os.fork()
    if pid == 0:
        c.close()
        sys.exit(0)
    out("child exit", os.waitpid(pid, 0)[1])
    p = select.poll()
    p.register(a, select.POLLIN)
    out("server readable after the child's close", bool(p.poll(300)))
    c.sendall(b"parent still")
    attempt("server recv", lambda: a.recv(20))
    return srv, c, a


def zero_length_calls(c, a):
    """Sends of zero bytes on c and receives of zero bytes on a (its peer): on an empty
    connection and with data waiting, which they leave where it is (dr_zero_length*)."""
    attempt("send empty", lambda: c.send(b""))
    attempt("sendall empty", lambda: c.sendall(b""))
    attempt("sendmsg no buffers", lambda: c.sendmsg([]))
    attempt("os.write empty", lambda: os.write(c.fileno(), b""))
    attempt("recv 0 empty", lambda: a.recv(0))
    attempt("recv 0 dontwait empty", lambda: a.recv(0, socket.MSG_DONTWAIT))
    attempt("os.read 0 empty", lambda: os.read(a.fileno(), 0))
    c.sendall(b"abc")
    attempt("peek 3", lambda: a.recv(3, socket.MSG_PEEK | socket.MSG_WAITALL))
    attempt("recv 0 with data", lambda: a.recv(0))
    attempt("recv_into empty buffer with data", lambda: a.recv_into(bytearray(0)))
    attempt("os.read 0 with data", lambda: os.read(a.fileno(), 0))
    attempt("recv 10", lambda: a.recv(10))
    c.sendall(b"x")
    attempt("recv 1", lambda: a.recv(1))
    attempt("recv dontwait empty", lambda: a.recv(1, socket.MSG_DONTWAIT))
