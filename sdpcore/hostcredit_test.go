package sdpcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSameHostBulkCredits: over shared memory a receiver grants
// sameHostBufs buffers once its messages go through the ring, and a bulk
// sender uses them while the peer's application does not read; small sends
// keep to the Hello's count and join the send queue. Every byte arrives.
func TestSameHostBulkCredits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size        int
		least, most int // messages the sender has outstanding when it stops
	}{
		{"bulk", bulkSend, 48, sameHostBufs},
		{"small", 1 << 10, 2, DefaultConfig().RecvBufs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ZCopyThreshold = 0
			a, p, _, _, _, _ := shmPairRing(t, cfg, 1<<20)
			// p's first message over the ring carries its larger grant.
			oneWay(t, p, a, 100)
			require.Equal(t, sameHostBufs, a.peerBufs, "p's grant over shared memory")

			data := make([]byte, tc.size)
			sent := 0
			for i := 0; i < 10_000; i++ {
				n, err := a.Send([][]byte{data}, time.Now())
				if err == ErrWouldBlock {
					break
				}
				require.NoError(t, err)
				sent += n
			}
			out := int(a.mseq - a.peerAck)
			require.GreaterOrEqual(t, out, tc.least, "messages outstanding when the sender stopped")
			require.LessOrEqual(t, out, tc.most, "messages outstanding when the sender stopped")
			if tc.name == "small" {
				require.NotEmpty(t, a.early, "small sends beyond the Hello's credits wait in the send queue")
			}

			// p reads it all: the credits come back and the queue drains
			// (a's progress, as the engine drives it, until a is writable).
			until := time.Now().Add(20 * time.Second)
			drained := make(chan error, 1)
			go func() { drained <- wait(t, a, EvOut, until) }()
			buf := make([]byte, 64<<10)
			got := 0
			for got < sent {
				k, err := p.Recv([][]byte{buf}, 0, time.Now())
				if err == ErrWouldBlock {
					require.NoError(t, wait(t, p, EvIn, until))
					continue
				}
				require.NoError(t, err)
				require.NotZero(t, k, "end of stream after %d of %d bytes", got, sent)
				got += k
			}
			require.Equal(t, sent, got)
			require.NoError(t, <-drained)
		})
	}
}
