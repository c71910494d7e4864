package tests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zcopyMsg and zcopyRounds are tests/c/zcopy.c's MSG and ROUNDS: each way, ROUNDS blocking
// sends of MSG bytes from one buffer, each read by a blocking recv into one buffer.
const (
	zcopyMsg    = 1 << 20
	zcopyRounds = 8
)

// TestZCopyBlocking shows that a blocking 1 MiB send to a receiver blocked in recv goes by
// Read ZCopy (SrcAvail, RDMA Read into the receiver's buffer, RdmaRdCompl) once the shim tells
// the engine that both calls wait; zcopy.c checks every byte. Each message is answered before
// the next is sent, so the receiver is already waiting: at least all messages but the first
// of each direction must have moved by zero copy (the first may be offered before the peer
// reaches recv and be cancelled after 20 ms, after which the sender uses buffer copy for 1 s).
func TestZCopyBlocking(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "zcopy"}})
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	env := func(prefix string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, prefix+".%p.log")), "TMPDIR="+dir)
	}
	srv := startC(ctx, t, dir, "server", env("server"), bins["zcopy"], "server", "-")
	ports := srv.waitPorts(t)
	cli := startC(ctx, t, dir, "client", env("client"), bins["zcopy"], append([]string{"client", "-"}, ports...)...)
	cli.wait(ctx, t)
	srv.wait(ctx, t)
	require.False(t, t.Failed())

	c, s := readStats(t, dir, "client"), readStats(t, dir, "server")
	assert.Equal(t, int64(1), c.n(t, "sdp_conns"))
	assert.Equal(t, int64(1), s.n(t, "sdp_conns"))
	const least = (zcopyRounds - 1) * zcopyMsg
	for _, p := range []struct {
		name string
		tx   stats // sender of one direction
		rx   stats // its receiver
	}{{"client to server", c, s}, {"server to client", s, c}} {
		zt, zr := p.tx.n(t, "zcopy_tx"), p.rx.n(t, "zcopy_rx")
		t.Logf("%s: zcopy_tx=%d zcopy_rx=%d zcopy_read_sends=%d zcopy_cancels=%d", p.name, zt, zr,
			p.tx.n(t, "zcopy_read_sends"), p.tx.n(t, "zcopy_cancels"))
		assert.GreaterOrEqualf(t, zt, int64(least), "%s: bytes sent by zero copy", p.name)
		assert.GreaterOrEqualf(t, zr, int64(least), "%s: bytes received by zero copy", p.name)
	}
	// Both directions' payload, counted once each way, whichever way it went.
	assert.Equal(t, int64(zcopyRounds*zcopyMsg+zcopyRounds*8), c.n(t, "payload_tx"))
	assert.Equal(t, int64(zcopyRounds*zcopyMsg+zcopyRounds*8), s.n(t, "payload_tx"))
}
