package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/internal/testnet"
)

// remoteSender serves one connection on ADDR:PORT and sends it SIZE bytes of a known pattern in
// 64 KiB sendall calls, then closes; it says PORTS once it listens.
const remoteSender = remoteAccept + `size = int(sys.argv[3])
block = bytes((i * 7 + 3) % 251 for i in range(65536))
sent = 0
while sent < size:
    c.sendall(block)
    sent += len(block)
c.close()
`

// remoteReader connects to ADDR:PORT and reads with blocking 128 KiB recv calls to the end,
// checking every byte against the sender's pattern.
const remoteReader = `import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
block = bytes((i * 7 + 3) % 251 for i in range(65536))
got = 0
buf = bytearray(131072)
while True:
    n = c.recv_into(buf)
    if n == 0:
        break
    off = got % 65536
    view = buf[:n]
    i = 0
    while i < n:
        k = min(n - i, 65536 - off)
        if view[i:i + k] != block[off:off + k]:
            sys.exit("wrong bytes at %d" % (got + i))
        i += k
        off = 0
    got += n
assert got == int(sys.argv[3]), got
`

// TestRemoteReceiveSinks: between two network namespaces (iWARP with markers and CRC, as
// between hosts), a real program's blocking receives read large messages from the engine's
// receive chunk straight into their buffers over the markers (iwarp/sink.go; the shim's
// SDP_POLL_RECV): the reader checks every byte, and most of them were placed directly
// (direct_placed_rx) rather than copied out of the chunk. The namespaces are the test's own.
func TestRemoteReceiveSinks(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	n := testnet.NewNetns(t, "sdprs", fmt.Sprintf("10.85.%d", os.Getpid()%200))
	const size = 16 << 20

	port := strconv.Itoa(freePort(t))
	env := func(side string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, side+".%p.log")), "SDP_TRUST_REMOTE="+n.AddrA+","+n.AddrB)
	}
	srv := startC(ctx, t, dir, "server", env("server"), "ip", "netns", "exec", n.A, python, "-c", remoteSender, n.AddrA, port, strconv.Itoa(size))
	require.Equal(t, []string{port}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", env("client"), "ip", "netns", "exec", n.B, python, "-c", remoteReader, n.AddrA, port, strconv.Itoa(size))
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	require.Contains(t, logText(t, dir, "client"), "transport=sdp/iwarp", "the connection ran over SDP between hosts")

	s := readStats(t, dir, "client")
	placed, payload := s.n(t, "direct_placed_rx"), s.n(t, "payload_rx")
	t.Logf("client: payload_rx=%d direct_placed_rx=%d user_copies_rx=%d markers_rx=%d", payload, placed, s.n(t, "user_copies_rx"), s.n(t, "markers_rx"))
	require.EqualValues(t, size, payload)
	require.NotZero(t, s.n(t, "markers_rx"), "markers on, as between hosts")
	require.Greater(t, placed, payload/2, "large messages read from the chunk straight into place")
}
