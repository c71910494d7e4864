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
// carried under 64 KiB offers it no shared memory (the set-up costs such a connection more than
// it saves) and says why, until one of its connections there carries more; a process's first
// connections always offer it.
func TestShortConnections(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	sizes := []int{1, 1, 1, 1, 1, 1, 256 << 10, 1, 1}
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", echoServer, strconv.Itoa(port), strconv.Itoa(len(sizes)))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	args := []string{"-c", shortClient, strconv.Itoa(port)}
	for _, n := range sizes {
		args = append(args, strconv.Itoa(n))
	}
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, args...)
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))

	ends := regexp.MustCompile(`fd \d+ clos(?:ed|ing) transport=(\S+)(.*)`).FindAllStringSubmatch(logText(t, dir, "client"), -1)
	require.Len(t, ends, len(sizes), "one line per connection")
	const why = `shm="the last connections to this peer were short"`
	for i, want := range []string{"shm", "shm", "shm", "shm", "iwarp", "iwarp", "iwarp", "shm", "shm"} {
		assert.Equal(t, "sdp/"+want, ends[i][1], "connection %d (%d bytes)", i+1, sizes[i])
		assert.Equal(t, want == "iwarp", strings.Contains(ends[i][2], why), "connection %d: %s", i+1, ends[i][2])
	}
}
