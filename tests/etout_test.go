package tests

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// etoutBytes is what the server of TestEdgeTriggeredOut writes.
const etoutBytes = 16000000

// TestEdgeTriggeredOut: a server registered edge triggered for EPOLLIN, EPOLLOUT and EPOLLRDHUP
// whose client has ended its stream (so EPOLLIN and EPOLLRDHUP stay ready, reported once) writes
// until EAGAIN and waits for EPOLLOUT, again and again, while the client reads
// (tests/c/etout.c), both preloaded, in every flow control and progress mode: every wait ends
// with EPOLLOUT, as over TCP. The room comes back as input (credit updates, ring
// acknowledgements) that the engine's own goroutine (asynchronous progress, or the one that
// sends queued bytes) may take off the socket before the waiting epoll_wait looks at it, which
// then finds the socket's edge with nothing to report: the set must be woken by the
// connection's eventfd, which it had only been given while nothing it asked for was ready
// (the server of TestEchoAtExit stalled so, 1 run in 4 with asynchronous progress).
func TestEdgeTriggeredOut(t *testing.T) {
	shim, ctx := setup(t)
	bin := buildTestC(ctx, t, "etout.c")
	forEachMode(t, false, func(t *testing.T, _ int, mode []string) { etoutOnce(t, shim, bin, mode) })
}

func etoutOnce(t *testing.T, shim, bin string, mode []string) {
	n := strconv.Itoa(etoutBytes)
	cli, srv, dir := runCPair(t, shim, bin, mode, []string{n}, []string{n})
	assert.Equal(t, fmt.Sprintf("ok %d\n", etoutBytes), cli, "the client")
	assert.Contains(t, srv, fmt.Sprintf("served %d ", etoutBytes), "the server")
	assert.EqualValues(t, 1, readStats(t, dir, "client").n(t, "sdp_conns"), "over SDP")
}
