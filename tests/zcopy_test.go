package tests

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zcopyEnv turns zero copy on (the default is off) for the programs that test it: from 32
// KiB, the papers' threshold.
// Zero copy is iWARP's: RDMA Read and Write placed straight into the
// application's buffers (direct placement). Over shared memory every byte
// crosses the ring, so these tests, which count the copies, keep iWARP.
var zcopyEnv = []string{"SDP_ZCOPY_THRESHOLD=32768", "SDP_SHM=0"}

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
	const least = (zcopyRounds - 1) * zcopyMsg
	// A receiver the machine does not run for 20 ms has its offer cancelled (zcopy_cancels),
	// and the sender then copies for 1 s: on a busy machine that may happen to any round, not
	// only the first. A run whose cancels left more than one round to buffer copy is told by
	// its counters and run again, at most three times; every run's counts are checked, and
	// one run must move all rounds but the first of each direction by zero copy.
	for try := 0; try < 3; try++ {
		_, c, s := runPreloaded(ctx, t, shim, bins["zcopy"], "-")
		assert.Equal(t, int64(1), c.n(t, "sdp_conns"))
		assert.Equal(t, int64(1), s.n(t, "sdp_conns"))
		// Both directions' payload, counted once each way, whichever way it went.
		assert.Equal(t, int64(zcopyRounds*zcopyMsg+zcopyRounds*8), c.n(t, "payload_tx"))
		assert.Equal(t, int64(zcopyRounds*zcopyMsg+zcopyRounds*8), s.n(t, "payload_tx"))
		late := false
		for _, p := range []struct {
			name string
			tx   stats // sender of one direction
			rx   stats // its receiver
		}{{"client to server", c, s}, {"server to client", s, c}} {
			zt, zr, cancels := p.tx.n(t, "zcopy_tx"), p.rx.n(t, "zcopy_rx"), p.tx.n(t, "zcopy_cancels")
			t.Logf("run %d, %s: zcopy_tx=%d zcopy_rx=%d zcopy_read_sends=%d zcopy_cancels=%d", try+1, p.name, zt, zr,
				p.tx.n(t, "zcopy_read_sends"), cancels)
			assert.Equalf(t, zt, zr, "%s: bytes sent by zero copy and received by zero copy", p.name)
			if cancels > 0 && zt < least {
				late = true
				continue
			}
			assert.GreaterOrEqualf(t, zt, int64(least), "%s: bytes sent by zero copy, no offer cancelled", p.name)
		}
		if !late {
			return
		}
	}
	t.Error("in every run a receiver was too late for its offers (zcopy_cancels above) and more than one round went by buffer copy")
}

// TestWriteZCopyBlocking shows that a blocking 1 MiB recv with nothing buffered offers its
// buffer (SinkAvail) and is filled by the peer's RDMA Write (RdmaWrCompl), with no payload byte
// copied by the receiving engine; zcopy_write.c checks every byte. The receiver says "go" just
// before it enters recv, so the sender's send may come before the SinkAvail reaches it and
// go by Read ZCopy instead (the SinkAvail is then cancelled): zero copy either way, and most
// rounds by RDMA Write.
func TestWriteZCopyBlocking(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "zcopy_write"}})
	const rounds = 8
	// Which offer wins each round is a race; a busy machine may give all eight of a run
	// to Read ZCopy. Every run is checked; one of at most three must use RDMA Write.
	var most int64
	for try := 0; try < 3 && most < zcopyMsg; try++ {
		_, c, s := runPreloaded(ctx, t, shim, bins["zcopy_write"], "-")
		wr, avails, writes := s.n(t, "zcopy_write_rx"), s.n(t, "zcopy_sink_avails"), c.n(t, "zcopy_write_sends")
		t.Logf("server: zcopy_sink_avails=%d zcopy_write_rx=%d zcopy_rx=%d user_copies_rx=%d direct_placed_rx=%d; client: zcopy_write_sends=%d zcopy_read_sends=%d",
			avails, wr, s.n(t, "zcopy_rx"), s.n(t, "user_copies_rx"), s.n(t, "direct_placed_rx"), writes, c.n(t, "zcopy_read_sends"))
		assert.GreaterOrEqual(t, avails, int64(1), "the blocking recv offered its buffer")
		assert.Equal(t, wr, writes*zcopyMsg, "each RDMA Write filled a whole 1 MiB recv")
		assert.Equal(t, int64(rounds*zcopyMsg), c.n(t, "payload_tx"))
		// Bytes not moved by zero copy (a round lost to Read ZCopy's cancel timer) may be
		// copied; those moved by RDMA Write are not.
		assert.LessOrEqual(t, s.n(t, "user_copies_rx"), int64(rounds*zcopyMsg)-wr+64, "copies on the receiving side")
		most = max(most, wr)
	}
	assert.GreaterOrEqual(t, most, int64(zcopyMsg), "at least one 1 MiB recv was filled by RDMA Write")
}

// TestZCopyInterrupted runs zcopy_intr.c with both ends preloaded and shows by the engines'
// counters that the interrupted calls were waiting on zero copy: the 64 MiB send on a Read
// ZCopy offer (SrcAvail, cancelled; the engine keeps a copy and reports the offer taken, as
// TCP reports what its buffer took), the 1 MiB recv on a Write ZCopy offer (SinkAvail,
// cancelled). zcopy_intr.c checks what the calls return, against plain TCP in TestCAPI, and
// every byte, and that neither buffer is touched after its call returned.
func TestZCopyInterrupted(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "zcopy_intr"}})
	for _, part := range []string{"send", "recv"} {
		t.Run(part, func(t *testing.T) {
			dir, c, s := runPreloaded(ctx, t, shim, bins["zcopy_intr"], part)
			if part == "send" {
				out, err := os.ReadFile(filepath.Join(dir, "client.out"))
				require.NoError(t, err)
				t.Logf("client: %s", bytes.TrimSpace(out))
				assert.Contains(t, string(out), "returned 4194304 ", "the interrupted send returns its 4 MiB offer, taken")
				assert.GreaterOrEqual(t, c.n(t, "zcopy_read_sends"), int64(1))
				assert.GreaterOrEqual(t, c.n(t, "zcopy_cancels"), int64(1))
			} else {
				assert.GreaterOrEqual(t, s.n(t, "zcopy_sink_avails"), int64(1))
				assert.GreaterOrEqual(t, s.n(t, "zcopy_cancels"), int64(1))
			}
			assert.Equal(t, int64(2), c.n(t, "sdp_conns"))
		})
	}
}

// runPreloaded runs the C test program bin as server and client of variant part, both ends
// preloaded with zero copy on (zcopyEnv), checks that both exited 0 and returns the directory of their logs and output
// with the client's and the server's stats lines.
func runPreloaded(ctx context.Context, t *testing.T, shim, bin, part string) (dir string, c, s stats) {
	t.Helper()
	dir = t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	env := func(prefix string) []string {
		return append(append(sdpEnv(shim, filepath.Join(dir, prefix+".%p.log")), zcopyEnv...), "TMPDIR="+dir)
	}
	srv := startC(ctx, t, dir, "server", env("server"), bin, "server", part)
	ports := srv.waitPorts(t)
	cli := startC(ctx, t, dir, "client", env("client"), bin, append([]string{"client", part}, ports...)...)
	cli.wait(ctx, t)
	srv.wait(ctx, t)
	require.False(t, t.Failed())
	return dir, readStats(t, dir, "client"), readStats(t, dir, "server")
}
