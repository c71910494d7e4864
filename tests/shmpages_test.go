package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ringReport is Python that prints "ring_kb N": the kilobytes of this process's shared-memory
// rings in memory (Rss of its sdp-ring mappings, /proc/self/smaps), read again (at most 10 s)
// while above $RING_KB_BOUND: a connection whose close lingers gives its pages back a little
// later. Appended to a script, it reports once that script is done.
const ringReport = `
import os as _os, time as _time
def _ring_kb(bound):
    deadline = _time.monotonic() + 10
    while True:
        kb, ring = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                if "-" in line.split(" ", 1)[0]:
                    ring = "sdp-ring" in line
                elif ring and line.startswith("Rss:"):
                    kb += int(line.split()[1])
        if kb <= bound or _time.monotonic() > deadline:
            return kb
        _time.sleep(0.01)
print("ring_kb %d" % _ring_kb(int(_os.environ["RING_KB_BOUND"])), flush=True)
`

// ringPair runs server and client (Python, both preloaded, each with the server's port and then
// its own args), with RING_KB_BOUND=boundKB, and checks that both ran over shared memory and
// that each reported holding at most boundKB of ring pages.
func ringPair(t *testing.T, boundKB int, server string, serverArgs []string, client string, clientArgs []string) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	env := func(name string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, name+".%p.log")), "SDP_SHM=1", "RING_KB_BOUND="+strconv.Itoa(boundKB))
	}
	port := strconv.Itoa(freePort(t))
	srv := startC(ctx, t, dir, "server", env("server"), python, append([]string{"-c", server, port}, serverArgs...)...)
	require.Equal(t, []string{port}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", env("client"), python, append([]string{"-c", client, port}, clientArgs...)...)
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	for name, p := range map[string]*cprog{"server": srv, "client": cli} {
		assert.Regexp(t, `transport=sdp/shm`, logText(t, dir, name), "%s: over shared memory", name)
		m := regexp.MustCompile(`ring_kb (\d+)`).FindStringSubmatch(outText(t, p))
		require.NotNil(t, m, "%s: %s", name, outText(t, p))
		kb, _ := strconv.Atoi(m[1])
		assert.LessOrEqual(t, kb, boundKB, "%s: KiB of ring pages held", name)
	}
}

// TestClosedConnectionsGiveBackRings: a connection over shared memory gives the pages of its
// rings back when it ends, in both processes: after 16 connections that each moved 1 MiB both
// ways (about 2 MiB of ring pages each), client and server hold no more than the control pages
// of the regions the garbage collector has not unmapped yet (8 KiB each), where they held every
// closed connection's rings until the collector's next cycle (echoServer, shortClient).
func TestClosedConnectionsGiveBackRings(t *testing.T) {
	const conns = 16
	var sizes []string
	for range conns {
		sizes = append(sizes, strconv.Itoa(1<<20))
	}
	ringPair(t, conns*8+64, echoServer+ringReport, []string{strconv.Itoa(conns)}, shortClient+ringReport, sizes)
}

// idleServer echoes one connection's first argv[2] bytes, then, with the connection still open
// and quiet, reports the rings' memory it holds, sends one byte (the client may close now) and
// closes at the client's end of stream.
const idleServer = `import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
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
` + ringReport + `
c.sendall(b"m")
assert c.recv(1) == b""
c.close()
`

// idleClient sends argv[2] bytes and reads them back, then, with the connection open and quiet,
// reports the rings' memory it holds, waits for the server's byte and closes.
const idleClient = `import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
c = socket.create_connection(("127.0.0.1", port))
c.sendall(b"x" * size)
got = 0
while got < size:
    b = c.recv(65536)
    assert b, got
    got += len(b)
` + ringReport + `
assert c.recv(1) == b"m"
c.close()
`

// TestIdleConnectionGivesBackRings: a connection over shared memory that carried 1 MiB each way
// and then went quiet, still open, gives its rings' pages back in both processes within a few
// of the engine's half-second ticks: it holds its two control pages, as an idle connection
// must (at most 64 KiB), where it held both rings (2 MiB) until it closed.
func TestIdleConnectionGivesBackRings(t *testing.T) {
	size := []string{strconv.Itoa(1 << 20)}
	ringPair(t, 64, idleServer, size, idleClient, size)
}
