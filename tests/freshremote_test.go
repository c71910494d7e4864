package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/testnet"
)

// remoteAccept listens on ADDR:PORT (argv 1 and 2), says PORTS once it does, and accepts one
// connection as c: the start of the python servers of the tests between namespaces.
const remoteAccept = `import socket, sys
s = socket.socket()
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("PORTS %s" % sys.argv[2], flush=True)
c, _ = s.accept()
`

// remoteEcho serves one connection on ADDR:PORT, echoing it, and says PORTS once it listens.
const remoteEcho = remoteAccept + `while True:
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
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	n := testnet.NewNetns(t, "sdpfr", fmt.Sprintf("10.84.%d", os.Getpid()%200))

	port := strconv.Itoa(freePort(t))
	env := func(side string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, side+".%p.log")), "SDP_TRUST_REMOTE="+n.AddrA+","+n.AddrB)
	}
	srv := startC(ctx, t, dir, "server", env("server"), "ip", "netns", "exec", n.A, python, "-c", remoteEcho, n.AddrA, port)
	require.Equal(t, []string{port}, srv.waitPorts(t))
	trace := filepath.Join(dir, "client.strace")
	cli := startC(ctx, t, dir, "client", env("client"), "ip", "netns", "exec", n.B,
		"strace", "-f", "-o", trace, "-e", "trace=fcntl,clone,clone3", python, "-c", remoteClient, n.AddrA, port)
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
