package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handoffServerPy accepts argv[2] connections on 127.0.0.1:argv[1] and hands each, unread, to
// one of two worker processes over a Unix socket (SCM_RIGHTS, socket.send_fds), closing its own
// copy at once, as Node's cluster module does; the workers echo each connection until end of
// stream. With argv[3] == "read-first" it reads one byte of the first connection before it
// hands it over, and prints what sendmsg said.
const handoffServerPy = `
import os, socket, sys
port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.bind(("127.0.0.1", port))
s.listen(64)
pipes = []
for w in range(2):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.fork() == 0:
        a.close()
        s.close()
        b.settimeout(60)
        while True:
            msg, fds, _, _ = socket.recv_fds(b, 1, 1)
            if not fds:
                os._exit(0)
            c = socket.socket(fileno=fds[0])
            c.settimeout(20)
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
            c.close()
    b.close()
    pipes.append(a)
print("PORT", port, flush=True)
for i in range(n):
    c, _ = s.accept()
    if mode == "read-first":
        c.settimeout(20)
        first = c.recv(1)
        try:
            socket.send_fds(pipes[i % 2], [b"c"], [c.fileno()])
            print("SENT", flush=True)
        except OSError as e:
            import errno
            print("SEND-FDS", errno.errorcode[e.errno], flush=True)
            c.sendall(first)
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
    else:
        socket.send_fds(pipes[i % 2], [b"c"], [c.fileno()])
    c.close()
for p in pipes:
    p.close()
for _ in range(2):
    os.wait()
print("SERVED", n, flush=True)
`

// handoffClientPy makes argv[2] connections in a row, each sending a payload of its own size
// (1 B to 64 KiB) and reading the echo to end of stream; it prints how many came back wrong.
const handoffClientPy = `
import hashlib, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
bad = 0
for i in range(n):
    data = hashlib.sha256(str(i).encode()).digest() * (1 + (i * 7919) % 2048)
    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(20)
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        got += d
    c.close()
    bad += got != data
print("WRONG", bad, flush=True)
`

// runHandoff runs the hand-off server and the client, both preloaded with env added, for n
// connections, and returns the server's output; the stats lines and logs are in dir.
func runHandoff(ctx context.Context, t *testing.T, shim, dir string, n int, mode string, env ...string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.CommandContext(ctx, python, "-c", handoffServerPy, strconv.Itoa(port), strconv.Itoa(n), mode)
	cmd.Env = append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), env...)
	cmd.WaitDelay = 10 * time.Second
	out := filepath.Join(dir, "server.out")
	p := runProc(t, "hand-off server", cmd, out)
	p.waitListening(ctx, t, port, sdpPort(port))

	cli := exec.CommandContext(ctx, python, "-c", handoffClientPy, strconv.Itoa(port), strconv.Itoa(n))
	// Every connection over SDP, those that carry little too: the hand-off is SDP's.
	cli.Env = append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), append([]string{"SDP_SHORT_TCP=0"}, env...)...)
	got, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", got)
	assert.Equal(t, "WRONG 0\n", string(got))
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("the hand-off server did not finish: %v", ctx.Err())
	}
	require.NoError(t, p.err, "%s", tail(out))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return string(b)
}

// TestHandoff: a server that accepts connections and hands them, unread, to worker processes
// over a Unix socket (SCM_RIGHTS) serves preloaded clients over SDP, every byte right, in every
// mode of the edge suite: the worker takes over the connection as if it had accepted it.
func TestHandoff(t *testing.T) {
	shim, ctx := setup(t)
	const n = 1000
	for _, m := range edgeModes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			dumpLogsOnFailure(t, dir)
			var env []string
			if m.env != "" {
				env = strings.Fields(m.env)
			}
			out := runHandoff(ctx, t, shim, dir, n, "unread", env...)
			assert.Contains(t, out, "SERVED 1000")
			st := readStats(t, dir, "client")
			assert.EqualValues(t, n, st.n(t, "sdp_conns"), "every connection over SDP")
			assert.Zero(t, st.n(t, "tcp_conns"))
		})
	}
}

// TestHandoffInUse: a connection the server has already read from is driven by its engine and
// cannot follow to another process: send_fds fails with EOPNOTSUPP and a log line says why,
// and the server can go on serving it itself.
func TestHandoffInUse(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	out := runHandoff(ctx, t, shim, dir, 1, "read-first")
	assert.Contains(t, out, "SEND-FDS ENOTSUP") // EOPNOTSUPP, which Python names ENOTSUP (the same number on Linux)
	assert.Contains(t, logText(t, dir, "server"), "cannot be passed to another process")
	assert.EqualValues(t, 1, readStats(t, dir, "client").n(t, "sdp_conns"))
}

// listenerHandoffPy forks a worker, then listens on 127.0.0.1:argv[1] and hands the listener
// to the worker over a Unix socket (SCM_RIGHTS), as a seamless reload does, and accepts
// nothing itself; the worker echoes argv[2] connections on it.
const listenerHandoffPy = `
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    a.close()
    b.settimeout(30)
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    s = socket.socket(fileno=fds[0])
    b.sendall(b"ok")
    for _ in range(n):
        c, _ = s.accept()
        c.settimeout(20)
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        c.close()
    os._exit(0)
b.close()
s = socket.socket()
s.bind(("127.0.0.1", port))
s.listen(8)
socket.send_fds(a, [b"l"], [s.fileno()])
a.settimeout(30)
assert a.recv(2) == b"ok"
print("PASSED", flush=True)
os.waitpid(pid, 0)
print("SERVED", n, flush=True)
`

// TestHandoffListener: a listener handed to another process (SCM_RIGHTS), as a seamless reload
// does, serves SDP clients there: the sender closes its SDP port as the listener goes, and the
// receiving process opens it again for the listener it got, so every client is served over SDP,
// every byte right, and none waits.
func TestHandoffListener(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	cmd := exec.CommandContext(ctx, python, "-c", listenerHandoffPy, strconv.Itoa(port), "3")
	cmd.Env = sdpEnv(shim, filepath.Join(dir, "server.%p.log"))
	cmd.WaitDelay = 10 * time.Second
	out := filepath.Join(dir, "server.out")
	p := runProc(t, "listener hand-off", cmd, out)
	// Passed: the listener is in the worker and the SDP port closed, before any client.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		if strings.Contains(string(b), "PASSED") {
			break
		}
		require.False(t, p.exited(), "the server exited: %s", b)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
	ls, err := listeningPorts()
	require.NoError(t, err)
	assert.True(t, ls[port])
	assert.True(t, ls[sdpPort(port)], "the SDP port is open again in the process the listener went to")

	cli := exec.CommandContext(ctx, python, "-c", handoffClientPy, strconv.Itoa(port), "3")
	cli.Env = sdpEnv(shim, filepath.Join(dir, "client.%p.log"))
	got, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", got)
	assert.Equal(t, "WRONG 0\n", string(got))
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	require.NoError(t, p.err, "%s", tail(out))
	st := readStats(t, dir, "client")
	assert.EqualValues(t, 3, st.n(t, "sdp_conns"))
	assert.Zero(t, st.n(t, "tcp_conns"))
	logs := logText(t, dir, "client")
	assert.NotContains(t, logs, "reason=timeout", "no client waits for a time-out")
	server := logText(t, dir, "server")
	assert.Contains(t, server, "a listener passed to another process")
	assert.Contains(t, server, "a listener passed from another process")
}

// upperServerPy serves argv[2] connections on the listener at descriptor argv[1], each
// echoing what it reads in upper case; the activators below hand it their listener.
const upperServerPy = `
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.settimeout(20)
    c.sendall(c.recv(100).upper())
    c.close()
print("SERVED", flush=True)
`

// socketActivatorPy is a socket activator that does not load libsdp (as systemd and
// systemd-socket-activate): it listens on 127.0.0.1:argv[1], then forks and execs a server with
// the listener as descriptor 3 and LISTEN_FDS=1, LISTEN_PID set (systemd's protocol), its
// environment's ACTIVATED_PRELOAD as the server's LD_PRELOAD. The server echoes argv[2]
// connections in upper case.
const socketActivatorPy = `
import os, socket, sys
port, n = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", int(port)))
s.listen(8)
server = """` + upperServerPy + `"""
pid = os.fork()
if pid == 0:
    if s.fileno() == 3:
        os.set_inheritable(3, True)
    else:
        os.dup2(s.fileno(), 3)
    env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), LD_PRELOAD=os.environ["ACTIVATED_PRELOAD"])
    os.execve(sys.executable, [sys.executable, "-c", server, "3", n], env)
s.close()
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
`

// TestSocketActivation: a preloaded server that inherits its listener from an activator that
// does not load libsdp (systemd's LISTEN_FDS) serves SDP on it: the SDP port opens as the
// server starts, and the preloaded clients are served over SDP, every byte right.
func TestSocketActivation(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	env := append(cleanEnv(), "ACTIVATED_PRELOAD="+shim, "SDP_STATS=1", "SDP_LOG_LEVEL=info",
		"SDP_LOG_FILE="+filepath.Join(dir, "server.%p.log"))
	p := startPython(ctx, t, "socket-activated server", env, filepath.Join(dir, "server.out"),
		"-c", socketActivatorPy, strconv.Itoa(port), "3")
	p.waitListening(ctx, t, port, sdpPort(port))
	helloClients(ctx, t, shim, dir, port, 3, "sdp_conns")
	p.finish(ctx, t)
	assert.Contains(t, logText(t, dir, "server"), "inherited from a socket activator")
}

// activatorPy listens on 127.0.0.1:argv[1] and, once a client knocks (the listener readable),
// execs a server that does not load libsdp (its environment without LD_PRELOAD), handing it
// the listener, as systemd-socket-activate does; the server echoes argv[2] connections in upper
// case.
const activatorPy = `
import os, select, socket, sys
port, n = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", int(port)))
s.listen(8)
print("LISTENING", flush=True)
select.select([s], [], [], 30)
s.set_inheritable(True)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
server = """` + upperServerPy + `"""
os.execve(sys.executable, [sys.executable, "-c", server, str(s.fileno()), n], env)
`

const helloClientPy = `
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.settimeout(20)
c.sendall(b"hello")
print(c.recv(100).decode(), flush=True)
`

// TestExecWithoutLibsdp: a preloaded process that execs a program without libsdp, handing it
// its listener (socket activation), takes the listener's SDP port with it: the client that
// knocked, queued on the SDP port, and every later one are served over TCP, at once and right.
func TestExecWithoutLibsdp(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	p := startPython(ctx, t, "activator", sdpEnv(shim, filepath.Join(dir, "server.%p.log")),
		filepath.Join(dir, "server.out"), "-c", activatorPy, strconv.Itoa(port), "3")
	p.waitListening(ctx, t, port, sdpPort(port))
	helloClients(ctx, t, shim, dir, port, 3, "tcp_conns")
	assert.Contains(t, p.finish(ctx, t), "SERVED")
}

// helloClients runs n preloaded helloClientPy clients in a row against port, each logging to
// dir/client<i>.*.log: each must get its HELLO, count one connection as key says (sdp_conns or
// tcp_conns), and never wait for a time-out.
func helloClients(ctx context.Context, t *testing.T, shim, dir string, port, n int, key string) {
	t.Helper()
	for i := 0; i < n; i++ {
		name := "client" + strconv.Itoa(i)
		cli := exec.CommandContext(ctx, python, "-c", helloClientPy, strconv.Itoa(port))
		cli.Env = sdpEnv(shim, filepath.Join(dir, name+".%p.log"))
		got, err := cli.CombinedOutput()
		require.NoError(t, err, "client %d: %s", i, got)
		assert.Equal(t, "HELLO\n", string(got), "client %d", i)
		assert.EqualValues(t, 1, readStats(t, dir, name).n(t, key), "client %d: %s", i, key)
		assert.NotContains(t, logText(t, dir, name), "reason=timeout", "client %d", i)
	}
}

// pidfdServerPy accepts one connection on 127.0.0.1:argv[1] and, before using it, runs a
// taker: a second process that copies the connection out of this one with pidfd_getfd (through
// libc, as ctypes finds it) and reads from its copy, printing what it got. Then the server
// reads the client's request from its own copy and answers it in upper case.
const pidfdServerPy = `
import ctypes, os, socket, subprocess, sys
taker = """
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(int(sys.argv[1]))
fd = libc.pidfd_getfd(pidfd, int(sys.argv[2]), 0)
if fd < 0:
    print("TAKER pidfd_getfd", errno.errorcode[ctypes.get_errno()], flush=True)
    sys.exit(0)
s = socket.socket(fileno=fd)
s.settimeout(5)
try:
    print("TAKER read", s.recv(100), flush=True)
except OSError as e:
    print("TAKER", errno.errorcode.get(e.errno, e), flush=True)
s.close()
"""
l = socket.socket()
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(8)
print("LISTENING", flush=True)
c, _ = l.accept()
subprocess.run([sys.executable, "-c", taker, str(os.getpid()), str(c.fileno())], check=True)
c.settimeout(20)
c.sendall(c.recv(100).upper())
c.close()
print("SERVED", flush=True)
`

// TestPidfdGetfd: a connection copied out of a preloaded server by another process with
// pidfd_getfd, which the server does not see go, is one whose SDP state stays in the server:
// the copy's read fails at once with EIO and a log line says why, never giving a protocol byte,
// and the server goes on serving the connection over SDP with its own copy.
func TestPidfdGetfd(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	p := startPython(ctx, t, "pidfd server", sdpEnv(shim, filepath.Join(dir, "server.%p.log")),
		filepath.Join(dir, "server.out"), "-c", pidfdServerPy, strconv.Itoa(port))
	p.waitListening(ctx, t, port, sdpPort(port))
	helloClients(ctx, t, shim, dir, port, 1, "sdp_conns")
	out := p.finish(ctx, t)
	assert.Contains(t, out, "TAKER EIO")
	assert.Contains(t, out, "SERVED")
	assert.Contains(t, logText(t, dir, "server"), "taken from another process (pidfd_getfd)")
}
