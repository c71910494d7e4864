package sdpcore

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStalledProgress reproduces the communication-progress case of Balaji,
// Bhagvat, Panda, Thakur and Gropp, "Advanced Flow-control Mechanisms for the
// Sockets Direct Protocol over InfiniBand", §3.2: a 64 KiB receive ring, and
// a sender that makes 64 sends of 2 KiB and then computes (makes no call).
// Half of the data fits the ring; the rest is held in the sender's buffer.
// The receiver reads the first half, which gives the ring back to the sender,
// and then waits for more. With rdma flow control and inline progress the
// held half stays where it is until the sender's next call; nic flow control
// (asynchronous flush) and asynchronous progress send it while the sender
// computes.
func TestStalledProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fc      FlowControl
		prog    Progress
		flushes bool
	}{
		{"rdma-inline", FlowRDMA, ProgressInline, false},
		{"nic-inline", FlowNIC, ProgressInline, true},
		{"rdma-async", FlowRDMA, ProgressAsync, true},
		{"nic-async", FlowNIC, ProgressAsync, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl, cfg.Progress = tc.fc, tc.prog
			cfg.BufSize, cfg.RecvBufs = 16<<10, 4 // a 64 KiB ring
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1) // both ends up
			const total = 64 * 2048
			data := make([]byte, total)
			rand.New(rand.NewSource(9)).Read(data)
			for i := 0; i < 64; i++ {
				n, err := p.Send([][]byte{data[i*2048 : (i+1)*2048]}, time.Now())
				require.NoError(t, err)
				require.Equal(t, 2048, n, "send %d: the sender's buffer takes it all", i)
				if p.NeedsBackground() { // as the engine does after every send
					go p.Background(time.Minute)
				}
			}
			st := p.Stats()
			require.NotZero(t, st.CreditStalls, "the ring filled up")
			require.NotZero(t, st.CoalescedSends, "later sends joined the held data")
			// The sender now computes. The receiver reads what comes: all
			// of it when something flushes the held half, otherwise only
			// the first half within the window.
			window := 500 * time.Millisecond
			if tc.flushes {
				window = 20 * time.Second
			}
			got := readFor(t, a, total, time.Now().Add(window))
			if tc.flushes {
				require.Equal(t, total, len(got), "the held half arrived while the sender computed")
			} else {
				require.Less(t, len(got), total, "rdma with inline progress held data back")
				require.GreaterOrEqual(t, len(got), 32<<10, "the first half of the ring was delivered")
				// Each call of the sender flushes what the ring has room
				// for by then.
				for i := 0; i < 100 && len(got) < total; i++ {
					_, _, _, err := p.Poll(EvOut, time.Now())
					require.NoError(t, err)
					got = append(got, readFor(t, a, total-len(got), time.Now().Add(200*time.Millisecond))...)
				}
				require.Equal(t, total, len(got))
			}
			require.True(t, bytes.Equal(data, got))
		})
	}
}

// readFor reads up to want bytes from c until until passes.
func readFor(t *testing.T, c *Conn, want int, until time.Time) []byte {
	got := make([]byte, 0, want)
	buf := make([]byte, 16<<10)
	for len(got) < want && time.Now().Before(until) {
		k, err := c.Recv([][]byte{buf[:min(len(buf), want-len(got))]}, 0, time.Now())
		if err == ErrWouldBlock {
			if err := wait(t, c, EvIn, until); err != nil {
				break // the window is over
			}
			continue
		}
		require.NoError(t, err)
		require.NotZero(t, k)
		got = append(got, buf[:k]...)
	}
	return got
}
