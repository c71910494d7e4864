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

// ringRSS is Python that defines ring_kb(bound): the kilobytes of this process's shared-memory
// rings in memory (Rss of its sdp-ring mappings, /proc/self/smaps), read again (at most 10 s)
// while above bound: a connection whose close lingers gives its pages back a little later.
const ringRSS = `import time
def ring_kb(bound):
    deadline = time.monotonic() + 10
    while True:
        kb, ring = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                if "-" in line.split(" ", 1)[0]:
                    ring = "sdp-ring" in line
                elif ring and line.startswith("Rss:"):
                    kb += int(line.split()[1])
        if kb <= bound or time.monotonic() > deadline:
            return kb
        time.sleep(0.01)
`

// pagesServer echoes argv[2] connections on 127.0.0.1:argv[1], one after another, then prints
// the rings' memory it still holds.
const pagesServer = ringRSS + `import socket, sys
port, count, bound = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
print("PORTS %d" % port, flush=True)
for _ in range(count):
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
print("ring_kb %d" % ring_kb(bound), flush=True)
`

// pagesClient makes argv[2] connections in a row, each sending argv[3] bytes, ending its stream
// and reading the echo to its end, then prints the rings' memory it still holds.
const pagesClient = ringRSS + `import socket, sys
port, count, size, bound = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for _ in range(count):
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
print("ring_kb %d" % ring_kb(bound), flush=True)
`

// TestClosedConnectionsGiveBackRings: a connection over shared memory gives the pages of its
// rings back when it ends, in both processes: after 16 connections that each moved 1 MiB both
// ways (about 2 MiB of ring pages each), client and server hold no more than the control pages
// of the regions the garbage collector has not unmapped yet (8 KiB each), where they held every
// closed connection's rings until the collector's next cycle.
func TestClosedConnectionsGiveBackRings(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	const conns, size = 16, 1 << 20
	const boundKB = conns*8 + 64
	bound := strconv.Itoa(boundKB)
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", pagesServer, strconv.Itoa(port), strconv.Itoa(conns), bound)
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, "-c", pagesClient, strconv.Itoa(port), strconv.Itoa(conns), strconv.Itoa(size), bound)
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	for _, side := range []struct {
		name string
		p    *cprog
	}{{"client", cli}, {"server", srv}} {
		assert.Equal(t, conns, strings.Count(logText(t, dir, side.name), "transport=sdp/shm"),
			"%s: every connection over shared memory", side.name)
		m := regexp.MustCompile(`ring_kb (\d+)`).FindStringSubmatch(outText(t, side.p))
		require.NotNil(t, m, "%s: %s", side.name, outText(t, side.p))
		kb, _ := strconv.Atoi(m[1])
		assert.LessOrEqual(t, kb, boundKB, "%s: KiB of ring pages held after %d closed connections", side.name, conns)
	}
}

// idleServer echoes one connection's first argv[2] bytes, then, with the connection still
// open and quiet, prints the rings' memory it holds, sends one byte (the client may close now)
// and closes at the client's end of stream.
const idleServer = ringRSS + `import socket, sys
port, size, bound = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
print("PORTS %d" % port, flush=True)
c, _ = s.accept()
got = 0
while got < size:
    b = c.recv(65536)
    assert b, got
    c.sendall(b)
    got += len(b)
print("ring_kb %d" % ring_kb(bound), flush=True)
c.sendall(b"m")
assert c.recv(1) == b""
c.close()
`

// idleClient sends argv[2] bytes and reads them back, then, with the connection open and quiet,
// prints the rings' memory it holds, waits for the server's byte and closes.
const idleClient = ringRSS + `import socket, sys
port, size, bound = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = socket.create_connection(("127.0.0.1", port))
c.sendall(b"x" * size)
got = 0
while got < size:
    b = c.recv(65536)
    assert b, got
    got += len(b)
print("ring_kb %d" % ring_kb(bound), flush=True)
assert c.recv(1) == b"m"
c.close()
`

// TestIdleConnectionGivesBackRings: a connection over shared memory that carried 1 MiB each way
// and then went quiet, still open, gives its rings' pages back in both processes within a few
// of the engine's half-second ticks: it holds its two control pages, as an idle connection
// must (at most 64 KiB), where it held both rings (2 MiB) until it closed.
func TestIdleConnectionGivesBackRings(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	const size, boundKB = 1 << 20, 64
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", idleServer, strconv.Itoa(port), strconv.Itoa(size), strconv.Itoa(boundKB))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, "-c", idleClient, strconv.Itoa(port), strconv.Itoa(size), strconv.Itoa(boundKB))
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	for _, side := range []struct {
		name string
		p    *cprog
	}{{"server", srv}, {"client", cli}} {
		assert.Contains(t, logText(t, dir, side.name), "transport=sdp/shm", "%s: over shared memory", side.name)
		m := regexp.MustCompile(`ring_kb (\d+)`).FindStringSubmatch(outText(t, side.p))
		require.NotNil(t, m, "%s: %s", side.name, outText(t, side.p))
		kb, _ := strconv.Atoi(m[1])
		assert.LessOrEqual(t, kb, boundKB, "%s: KiB of ring pages held by the quiet connection", side.name)
	}
}
