package tests

import (
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

// shortClient makes one connection after another to 127.0.0.1:PORT, one for each SIZE: it sends
// SIZE bytes, ends its stream, reads the echo to its end and closes.
const shortClient = `import socket, sys
port = int(sys.argv[1])
for size in map(int, sys.argv[2:]):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"x" * size)
    c.shutdown(socket.SHUT_WR)
    got = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += len(b)
    c.close()
    assert got == size, (got, size)
print("ok", flush=True)
`

// TestShortConnections: a preloaded client whose last 4 connections to a preloaded server each
// carried under 64 KiB in a few messages offers it no shared memory, and once 8 did, makes its next ones there over
// plain TCP (SDP's set-up costs such a connection more than it saves), saying why; after 16 of
// them one goes over SDP again, without shared memory, and when that one carries more, the next
// ones are SDP's with shared memory again. A process's first connections always use SDP.
func TestShortConnections(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	var sizes, want []string
	add := func(n int, size, transport string) {
		for range n {
			sizes, want = append(sizes, size), append(want, transport)
		}
	}
	add(4, "1", "shm")
	add(4, "1", "iwarp")
	add(16, "1", "tcp")
	add(1, strconv.Itoa(256<<10), "iwarp")
	add(2, "1", "shm")
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", echoServer, strconv.Itoa(port), strconv.Itoa(len(sizes)))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client",
		append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, append([]string{"-c", shortClient, strconv.Itoa(port)}, sizes...)...)
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))

	// One line per connection, in order: the engine's at an SDP connection's end, the shim's
	// when a connect goes to TCP.
	lines := regexp.MustCompile(`fd \d+ (?:clos(?:ed|ing) transport=(sdp/\S+)(.*)|transport=tcp reason=(\S+))`).
		FindAllStringSubmatch(logText(t, dir, "client"), -1)
	require.Len(t, lines, len(sizes), "one line per connection")
	const why = `shm="the last connections to this peer were short"`
	for i, w := range want {
		got := lines[i][1]
		if w == "tcp" {
			assert.Equal(t, "short-connections", lines[i][3], "connection %d (%s bytes)", i+1, sizes[i])
			continue
		}
		assert.Equal(t, "sdp/"+w, got, "connection %d (%s bytes)", i+1, sizes[i])
		assert.Equal(t, w == "iwarp", strings.Contains(lines[i][2], why), "connection %d: %s", i+1, lines[i][2])
	}
}

// oneAcceptServer accepts argv[2] connections on a non-blocking listener, one per wake-up as
// nginx does (select, then accept4), answers each one byte with one and closes it.
const oneAcceptServer = `import select, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
s.setblocking(False)
print("PORTS %d" % port, flush=True)
for _ in range(n):
    for _ in range(100):
        select.select([s], [], [], 30)
        try:
            c, _ = s.accept()
            break
        except BlockingIOError:
            pass
    c.setblocking(True)
    c.settimeout(20)
    c.recv(1)
    c.sendall(b"y")
    c.close()
print("served", flush=True)
`

// oneByteClient makes argv[2] connections in a row, each sending one byte and reading one back.
const oneByteClient = `import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port), timeout=20)
    c.sendall(b"x")
    assert c.recv(1) == b"y"
    c.close()
print("ok", flush=True)
`

// TestPlainClientsAcceptedFirst: a preloaded server whose clients come to its port itself (plain
// ones, and preloaded ones whose connections carry little) asks that port first after 8 of them,
// instead of its hidden SDP listener's empty queue at every accept; an SDP client that comes next
// is still accepted, over SDP.
func TestPlainClientsAcceptedFirst(t *testing.T) {
	shim, ctx := setup(t)
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("strace is missing: run make deps")
	}
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	const plain = 24
	port := strconv.Itoa(freePort(t))
	trace := filepath.Join(dir, "server.strace")
	srv := startC(ctx, t, dir, "server", sdpEnv(shim, filepath.Join(dir, "server.%p.log")),
		"strace", "-f", "-o", trace, "-e", "trace=accept4", python, "-c", oneAcceptServer, port, strconv.Itoa(plain+1))
	require.Equal(t, []string{port}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "plain", cleanEnv(), python, "-c", oneByteClient, port, strconv.Itoa(plain))
	require.Zero(t, exitCode(ctx, t, cli), "plain client: %s", outText(t, cli))
	sdp := startC(ctx, t, dir, "client", sdpEnv(shim, filepath.Join(dir, "client.%p.log")), python, "-c", oneByteClient, port, "1")
	require.Zero(t, exitCode(ctx, t, sdp), "preloaded client: %s", outText(t, sdp))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))

	st := readStats(t, dir, "server")
	assert.EqualValues(t, 1, st.n(t, "sdp_conns"), "the preloaded client's connection over SDP")
	assert.EqualValues(t, plain, st.n(t, "tcp_conns"))
	text, err := os.ReadFile(trace)
	require.NoError(t, err)
	calls := regexp.MustCompile(`(?m)accept4\(.*\) = (-1 EAGAIN|\d+)`).FindAllStringSubmatch(string(text), -1)
	failed := 0
	for _, c := range calls {
		if strings.HasPrefix(c[1], "-1") {
			failed++
		}
	}
	// Asking the hidden listener first at every accept fails once per plain client (24); asking P
	// first after 8 fails at the first 8, at every 8th after (the hidden listener's turn), and once
	// for the SDP client (P empty): 11 of the 24.
	assert.LessOrEqual(t, failed, 12, "accept4 calls that found nothing:\n%s", text)
	assert.GreaterOrEqual(t, len(calls), plain+1, "accept4 calls:\n%s", text)
}
