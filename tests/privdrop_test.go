package tests

import (
	"bufio"
	"context"
	"io"
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

// dropperPy listens as root, then becomes the user argv[1] (as nginx's, PostgreSQL's and
// memcached's workers do) and only then serves one connection: an echo in upper case.
const dropperPy = `
import os, socket, sys
uid = int(sys.argv[1])
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[2])))
s.listen(8)
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
print("PORT", s.getsockname()[1], flush=True)
a, _ = s.accept()
a.settimeout(20)
a.sendall(a.recv(100).upper())
a.close()
`

const echoClientPy = `
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.settimeout(20)
c.sendall(b"hello")
print("GOT", c.recv(100).decode(), flush=True)
`

// TestPrivilegeDrop: libsdp lives in a directory only root can enter (a clone in root's home,
// mode 0700), and the server drops its privileges between listen() and its first SDP call, so
// its engine's path is out of its reach by then. The shim opened the engine when the listener
// was made; the server loads it through that descriptor and the connection runs over SDP.
func TestPrivilegeDrop(t *testing.T) {
	shim, ctx := setup(t)
	uid := squatterUID(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	lib := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(lib, 0o755))
	for _, name := range []string{"libsdp.so", "libsdp-engine.so"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(shim), name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(lib, name), b, 0o755))
	}
	hidden := filepath.Join(lib, "libsdp.so")
	dumpLogsOnFailure(t, dir)

	srv := exec.CommandContext(ctx, python, "-c", dropperPy, strconv.Itoa(int(uid)), strconv.Itoa(freePort(t)))
	srv.Env = sdpEnv(hidden, filepath.Join(dir, "server.%p.log"))
	srv.Dir = "/"
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	srv.Stderr = os.Stderr
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	port := readPort(ctx, t, out)

	cli := exec.CommandContext(ctx, python, "-c", echoClientPy, strconv.Itoa(port))
	cli.Env = sdpEnv(hidden, filepath.Join(dir, "client.%p.log"))
	got, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", got)
	assert.Equal(t, "GOT HELLO\n", string(got))
	require.NoError(t, srv.Wait())
	assert.EqualValues(t, 1, readStats(t, dir, "client").n(t, "sdp_conns"), "the client's connection over SDP")
	assert.EqualValues(t, 1, readStats(t, dir, "server").n(t, "sdp_conns"), "the unprivileged server's connection over SDP")
	assert.NotContains(t, logText(t, dir, "server"), "cannot load")
}

// readPort reads the "PORT n" line a server prints.
func readPort(ctx context.Context, t *testing.T, r io.Reader) int {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		p, err := strconv.Atoi(strings.TrimPrefix(l, "PORT "))
		require.NoErrorf(t, err, "server said %q", l)
		return p
	case <-ctx.Done():
		t.Fatal("the server did not say its port")
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not say its port within 30 s")
	}
	return 0
}

// forkSharedPy: a client connects and forks before either process used the connection; the
// child uses it first (an echo through the server), then the parent tries to read from it.
const forkSharedPy = `
import errno, os, socket, sys
srv = socket.socket()
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(4)
if os.fork() == 0:
    a, _ = srv.accept()
    a.settimeout(20)
    a.sendall(a.recv(5).upper())
    a.recv(1)
    sys.exit(0)
c = socket.create_connection(srv.getsockname())
c.settimeout(20)
pid = os.fork()
if pid == 0:
    c.sendall(b"hello")
    print("child got", c.recv(5).decode(), flush=True)
    sys.exit(0)
os.waitpid(pid, 0)
try:
    print("parent read", c.recv(5), flush=True)
except OSError as e:
    print("parent error", errno.errorcode.get(e.errno, e), flush=True)
`

// TestForkSharedPending: a connection not yet used when its process forks is taken over SDP by
// the first process that uses it; the other fails at once with EIO and a log line that names
// the rule keeping such programs on TCP, instead of waiting for a handshake the first consumed.
func TestForkSharedPending(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	cmd := exec.CommandContext(ctx, python, "-c", forkSharedPy, strconv.Itoa(freePort(t)))
	cmd.Env = sdpEnv(shim, filepath.Join(dir, "client.%p.log"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "child got HELLO\nparent error EIO\n", string(out))
	assert.Contains(t, logText(t, dir, "client"), "an SDP connection belongs to one process")
}
