package tests

import (
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
