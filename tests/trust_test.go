package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Who answers a connection (SECURITY.md): a preloaded client connecting to port P reaches only
// P's owner, never whoever holds the SDP port S(P).

// otherUser is the unprivileged user the tests run a squatter as; they create it.
const otherUser = "sdp-squatter"

// squatterPy listens on the port of argv[1] as soon as it is free (trying for 60 s) with
// argv[2] as its backlog, says BOUND, and counts the connections that reach it until its
// standard input ends; then it says ACCEPTED and the count. Every connection that reached the
// kernel's queue is counted, accepted or not.
const squatterPy = `
import os, socket, sys, time
port, backlog = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
deadline = time.monotonic() + 60
while True:
    try:
        s.bind(("127.0.0.1", port))
        break
    except OSError:
        if time.monotonic() > deadline:
            print("NOT BOUND", flush=True)
            sys.exit(1)
        time.sleep(0.01)
s.listen(backlog)
print("BOUND", flush=True)
sys.stdin.read()
s.setblocking(False)
n = 0
while True:
    try:
        s.accept()[0].close()
        n += 1
    except BlockingIOError:
        break
print("ACCEPTED", n, flush=True)
`

// squatter is a listener on an SDP port that is not the application port owner's.
type squatter struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	lines chan string
}

// startSquatter runs squatterPy on port with backlog, as uid (0: this test's user), and waits
// until it holds the port.
func startSquatter(ctx context.Context, t *testing.T, port, backlog int, uid uint32) *squatter {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, "-c", squatterPy, strconv.Itoa(port), strconv.Itoa(backlog))
	cmd.Env = cleanEnv()
	cmd.Dir = "/"
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	s := &squatter{cmd: cmd, stdin: in, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	return s
}

// next returns the squatter's next line ("" if it ended without one).
func (s *squatter) next(ctx context.Context, t *testing.T) string {
	t.Helper()
	select {
	case l := <-s.lines:
		return l
	case <-ctx.Done():
		t.Fatalf("the squatter said nothing: %v", ctx.Err())
		return ""
	}
}

// accepted ends the squatter and returns how many connections reached it.
func (s *squatter) accepted(ctx context.Context, t *testing.T) int {
	t.Helper()
	require.NoError(t, s.stdin.Close())
	l := s.next(ctx, t)
	n, err := strconv.Atoi(strings.TrimPrefix(l, "ACCEPTED "))
	require.NoErrorf(t, err, "squatter's last line %q", l)
	return n
}

// squatterUID creates otherUser when it does not exist and returns its uid.
func squatterUID(t *testing.T) uint32 {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "these tests run as root: they create a second user")
	if _, err := user.Lookup(otherUser); err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--user-group",
			"--shell", "/usr/sbin/nologin", otherUser).CombinedOutput()
		require.NoErrorf(t, err, "useradd: %s", out)
	}
	u, err := user.Lookup(otherUser)
	require.NoError(t, err)
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	require.NotZero(t, uid)
	return uint32(uid)
}

// fetchReal runs a preloaded curl for the service's page and asserts it got the real one.
func fetchReal(ctx context.Context, t *testing.T, shim, dir string, port int) {
	t.Helper()
	out := filepath.Join(dir, "got.html")
	require.NoError(t, curl(ctx, shim, dir, "-o", out, fmt.Sprintf("http://127.0.0.1:%d/index.html", port)))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "the real service\n", string(b), "the client reached another service")
	require.NoError(t, os.Remove(out))
}

// clientReasons counts the client logs' transport lines by transport and reason.
func clientReasons(t *testing.T, dir string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, m := range regexp.MustCompile(`transport=(sdp|tcp)( reason=[a-z-]+)?`).FindAllStringSubmatch(logText(t, dir, "client"), -1) {
		n[m[1]+m[2]]++
	}
	return n
}

// TestTakeover: another, unprivileged user holds the SDP port of a real service's port, before
// the service starts and across its restart; preloaded clients reach the real service every
// time (over TCP), and no connection reaches the other user's listener. The squatter even
// carries the mark of an SDP listener (its backlog): only the owner check stops it.
func TestTakeover(t *testing.T) {
	shim, ctx := setup(t)
	uid := squatterUID(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	www := filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(www, "index.html"), []byte("the real service\n"), 0o644))
	port := freePort(t)
	// http.server listens with a backlog of 5: its SDP listener's is 4.
	const twinBacklog = 4

	t.Run("squatter-first", func(t *testing.T) {
		sq := startSquatter(ctx, t, sdpPort(port), twinBacklog, uid)
		require.Equal(t, "BOUND", sq.next(ctx, t))
		logs := t.TempDir()
		srv := startServerTCP(ctx, t, shim, www, logs, port)
		for range 3 {
			fetchReal(ctx, t, shim, logs, port)
		}
		srv.stop()
		assert.Zero(t, sq.accepted(ctx, t), "connections that reached the other user's listener")
		assert.Equal(t, map[string]int{"tcp reason=untrusted-sdp-port": 3}, clientReasons(t, logs))
		assert.Contains(t, logText(t, logs, "server"), "reason=sdp-port-busy")
	})

	t.Run("across-a-restart", func(t *testing.T) {
		logs := t.TempDir()
		srv := startServer(ctx, t, shim, www, logs, port)
		fetchReal(ctx, t, shim, logs, port)
		assert.Equal(t, map[string]int{"sdp": 1}, clientReasons(t, logs), "the service's own SDP listener is used")
		// The squatter waits for the SDP port while the service holds it, and takes it the
		// moment the service stops; the service comes back without it.
		sq := startSquatter(ctx, t, sdpPort(port), twinBacklog, uid)
		srv.stop()
		require.Equal(t, "BOUND", sq.next(ctx, t))
		srv = startServerTCP(ctx, t, shim, www, logs, port)
		for range 3 {
			fetchReal(ctx, t, shim, logs, port)
		}
		srv.stop()
		assert.Zero(t, sq.accepted(ctx, t), "connections that reached the other user's listener")
		assert.Equal(t, map[string]int{"sdp": 1, "tcp reason=untrusted-sdp-port": 3}, clientReasons(t, logs))
	})
}

// TestUnrelatedServiceOnSDPPort: a plain service of the same user happens to listen on the SDP
// port of a preloaded service. Twenty preloaded clients in a row reach the real service without
// waiting for an MPA Request (the client sees that the listener is not the service's SDP
// listener before connecting), and the unrelated service sees no connection.
func TestUnrelatedServiceOnSDPPort(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	www := filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(www, "index.html"), []byte("the real service\n"), 0o644))
	port := freePort(t)
	sq := startSquatter(ctx, t, sdpPort(port), 128, 0)
	require.Equal(t, "BOUND", sq.next(ctx, t))
	srv := startServerTCP(ctx, t, shim, www, dir, port)
	const clients = 20
	var plain, preloaded time.Duration
	for range clients {
		t0 := time.Now()
		fetchReal(ctx, t, "", dir, port)
		t1 := time.Now()
		fetchReal(ctx, t, shim, dir, port)
		plain, preloaded = plain+t1.Sub(t0), preloaded+time.Since(t1)
	}
	srv.stop()
	t.Logf("%d fetches: plain curl %v each, preloaded %v each", clients, plain/clients, preloaded/clients)
	assert.Zero(t, sq.accepted(ctx, t), "connections that reached the unrelated service")
	assert.Equal(t, map[string]int{"tcp reason=foreign": clients}, clientReasons(t, dir),
		"every client went to the service's own port at once")
}

// startServerTCP is startServer for a preloaded service whose SDP port is taken: it waits for
// the application port only.
func startServerTCP(ctx context.Context, t *testing.T, shim, dir, logDir string, port int) *proc {
	t.Helper()
	return startServerOn(ctx, t, shim, dir, logDir, port, false)
}

// TestTrustPeer: the check a client makes of the listener that took its connection to an SDP port
// (shim/trust.c's trust_peer), against listeners of two users: it names the listener's owner and
// no one else, so a port that changed hands between the check before connect() and connect()
// itself is found before a byte is sent.
func TestTrustPeer(t *testing.T) {
	_, ctx := setup(t)
	uid := squatterUID(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "trustpeer")
	out, err := exec.CommandContext(ctx, "gcc", "-O2", "-D_GNU_SOURCE", "-I", root, "-o", bin,
		filepath.Join(root, "tests", "c", "trustpeer.c"), filepath.Join(root, "shim", "trust.c")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, owner := range []uint32{0, uid} {
		port := freePort(t)
		sq := startSquatter(ctx, t, port, 8, owner)
		require.Equal(t, "BOUND", sq.next(ctx, t))
		got, err := exec.CommandContext(ctx, bin, strconv.Itoa(port), "0", strconv.Itoa(int(uid))).CombinedOutput()
		require.NoError(t, err, "%s", got)
		want := fmt.Sprintf("0 %s\n%d %s\n", yesNo(owner == 0), uid, yesNo(owner == uid))
		assert.Equal(t, want, string(got), "listener of uid %d", owner)
		assert.Equal(t, 1, sq.accepted(ctx, t), "the one connection reached the listener")
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
