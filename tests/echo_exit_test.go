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
	names, envs := flowProgressModes(true)
	for i, name := range names {
		mode, seed := envs[i], i+2
		t.Run(name, func(t *testing.T) {
			echoOnce(t, shim, bin, mode, seed)
		})
	}
}

func echoOnce(t *testing.T, shim, bin string, mode []string, seed int) {
	_, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	srvOut := filepath.Join(dir, "server.out")
	p := startProg(ctx, t, "etecho server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), mode...),
		srvOut, bin, "server", strconv.Itoa(port), strconv.Itoa(seed))
	p.waitListening(ctx, t, port, sdpPort(port))
	cli := exec.CommandContext(ctx, bin, "client", strconv.Itoa(port), strconv.Itoa(seed+1000), strconv.Itoa(echoBytes))
	cli.Env = append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), mode...)
	got, err := cli.CombinedOutput()
	assert.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("ok %d\n", echoBytes), string(got), "the client")
	b := p.finish(ctx, t)
	assert.Contains(t, b, fmt.Sprintf("served %d\n", echoBytes))
	assert.EqualValues(t, 1, readStats(t, dir, "client").n(t, "sdp_conns"), "over SDP")
}
