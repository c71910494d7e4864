package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// echoBytes is what the client of TestEchoAtExit streams and must get back.
const echoBytes = 8000000

// TestEchoAtExit: an edge-triggered epoll echo server (non-blocking, writes of random sizes up to
// 1 MiB) that closes its connection and exits at once when its client ends the stream, and a
// poll-driven client that streams 8 MB and checks every byte of the echo (tests/c/etecho.c),
// both preloaded, in every combination of flow control, buffering and progress: the server's
// last bytes, accepted by write() before close and _exit, all reach the client, as over TCP.
// Run it with -count=13 for 208 runs. The transfer used to stall in some runs (the server's
// edge-triggered wait for EPOLLOUT missing the room its engine's goroutine took in:
// TestEdgeTriggeredOut).
func TestEchoAtExit(t *testing.T) {
	shim, ctx := setup(t)
	bin := buildTestC(ctx, t, "etecho.c")
	forEachMode(t, true, func(t *testing.T, i int, mode []string) { echoOnce(t, shim, bin, mode, i+2) })
}

func echoOnce(t *testing.T, shim, bin string, mode []string, seed int) {
	cli, srv, dir := runCPair(t, shim, bin, mode, []string{strconv.Itoa(seed)},
		[]string{strconv.Itoa(seed + 1000), strconv.Itoa(echoBytes)})
	assert.Equal(t, fmt.Sprintf("ok %d\n", echoBytes), cli, "the client")
	assert.Contains(t, srv, fmt.Sprintf("served %d\n", echoBytes))
	assert.EqualValues(t, 1, readStats(t, dir, "client").n(t, "sdp_conns"), "over SDP")
}

// runCPair runs a tests/c program's server (bin server PORT srvArgs...) and then its client
// (bin client PORT cliArgs...), both preloaded with mode added, and returns the client's
// output, the server's once it has exited, and the directory of their logs. Either one
// failing fails the test.
func runCPair(t *testing.T, shim, bin string, mode, srvArgs, cliArgs []string) (cli, srv, dir string) {
	t.Helper()
	_, ctx := setup(t)
	dir = t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	ps, name := strconv.Itoa(port), filepath.Base(bin)
	p := startProg(ctx, t, name+" server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), mode...),
		filepath.Join(dir, "server.out"), bin, append([]string{"server", ps}, srvArgs...)...)
	p.waitListening(ctx, t, port, sdpPort(port))
	c := exec.CommandContext(ctx, bin, append([]string{"client", ps}, cliArgs...)...)
	c.Env = append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), mode...)
	got, err := c.CombinedOutput()
	assert.NoError(t, err, "the client: %s", got)
	return string(got), p.finish(ctx, t), dir
}
