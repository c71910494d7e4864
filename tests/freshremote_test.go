package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// remoteEcho serves one connection on ADDR:PORT, echoing it, and says PORTS once it listens.
const remoteEcho = `import socket, sys
s = socket.socket()
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("PORTS %s" % sys.argv[2], flush=True)
c, _ = s.accept()
while True:
    b = c.recv(65536)
    if not b:
        break
    c.sendall(b)
c.close()
`

// remoteClient sends 1000 bytes to ADDR:PORT, ends its stream and reads the echo to its end.
const remoteClient = `import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
c.sendall(b"x" * 1000)
c.shutdown(socket.SHUT_WR)
got = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    got += len(b)
assert got == 1000, got
`

// TestFreshClientGrowsFdTableFirst: a fresh preloaded client connecting to a peer in another
// network namespace grows its descriptor table to the shim's high descriptors before the engine's
// runtime starts a thread (shim/engine.c, grow_fd_table). Grown later, from a process of several
// threads, the kernel waits for an RCU grace period (10-16 ms seen), which such a client paid on
// its first connection: one connecting on this host had grown it already for its sock_diag socket.
// The namespaces and the veth pair between them are the test's own.
func TestFreshClientGrowsFdTableFirst(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "this test runs as root: it creates network namespaces")
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	pid := os.Getpid()
	nsA, nsB := fmt.Sprintf("sdpfr-a-%d", pid), fmt.Sprintf("sdpfr-b-%d", pid)
	vA, vB := fmt.Sprintf("sfr%da", pid%100000), fmt.Sprintf("sfr%db", pid%100000)
	addrA, addrB := fmt.Sprintf("10.84.%d.1", pid%200), fmt.Sprintf("10.84.%d.2", pid%200)
	ip := func(args ...string) {
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", nsA).Run()
		_ = exec.Command("ip", "netns", "del", nsB).Run()
	})
	ip("netns", "add", nsA)
	ip("netns", "add", nsB)
	ip("link", "add", vA, "netns", nsA, "type", "veth", "peer", "name", vB, "netns", nsB)
	ip("-n", nsA, "addr", "add", addrA+"/24", "dev", vA)
	ip("-n", nsB, "addr", "add", addrB+"/24", "dev", vB)
	for _, n := range []struct{ ns, dev string }{{nsA, vA}, {nsB, vB}, {nsA, "lo"}, {nsB, "lo"}} {
		ip("-n", n.ns, "link", "set", n.dev, "up")
	}

	port := strconv.Itoa(freePort(t))
	env := func(side string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, side+".%p.log")), "SDP_TRUST_REMOTE="+addrA+","+addrB)
	}
	srv := startC(ctx, t, dir, "server", env("server"), "ip", "netns", "exec", nsA, python, "-c", remoteEcho, addrA, port)
	require.Equal(t, []string{port}, srv.waitPorts(t))
	trace := filepath.Join(dir, "client.strace")
	cli := startC(ctx, t, dir, "client", env("client"), "ip", "netns", "exec", nsB,
		"strace", "-f", "-o", trace, "-e", "trace=fcntl,clone,clone3", python, "-c", remoteClient, addrA, port)
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	require.Contains(t, logText(t, dir, "client"), "transport=sdp/iwarp", "the client's connection ran over SDP")

	text, err := os.ReadFile(trace)
	require.NoError(t, err)
	// The first move of a descriptor to the highest floor seen (the engine's: half the
	// descriptor limit, which the engine's runtime raises to the hard one) and the first thread
	// started after the client's own start.
	dup := regexp.MustCompile(`fcntl\(\d+, F_DUPFD_CLOEXEC, (\d+)\)`)
	lines := strings.Split(string(text), "\n")
	floor := 0
	for _, line := range lines {
		if m := dup.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			floor = max(floor, n)
		}
	}
	high, thread := -1, -1
	for i, line := range lines {
		if m := dup.FindStringSubmatch(line); m != nil && high < 0 && m[1] == strconv.Itoa(floor) {
			high = i
		}
		if thread < 0 && strings.Contains(line, "CLONE_THREAD") {
			thread = i
		}
	}
	require.GreaterOrEqual(t, high, 0, "a descriptor moved high:\n%s", text)
	require.GreaterOrEqual(t, thread, 0, "the engine's runtime started threads:\n%s", text)
	assert.Less(t, high, thread, "the table grew before the first thread:\n%s", text)
}
