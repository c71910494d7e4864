package sdpcore

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoBackPressure is an event loop's echo server on c, as node's
// socket.pipe(socket) is one: it reads nothing while its echo has not gone,
// so that a send that cannot go stops its reading (back-pressure), and at
// the end of the stream it shuts down its side.
func echoBackPressure(t *testing.T, c *Conn, until time.Time) error {
	buf := make([]byte, 64<<10)
	for {
		k, err := recvWait(t, c, buf, 0, until)
		if err != nil {
			return err
		}
		if k == 0 {
			return shutWrite(c)
		}
		if err := sendBytes(t, c, buf[:k], 0, until); err != nil {
			return err
		}
	}
}

// TestEchoBackPressure: a client streams to an echo server that stops
// reading while its echo cannot be sent, and reads every byte back, over
// shared memory and over iWARP. Both ends' sends wait for each other's
// reads here: a flow-control rule whose waits the other end does not answer
// hangs it (node's echo in the compatibility suite found one). Also with
// the application's SO_RCVBUF set and with more buffers than the engine
// otherwise holds (SDP_RECV_BUFS=64): a receiver that stopped taking
// messages in before the buffers it granted were full left the peer's
// credits unread behind them.
func TestEchoBackPressure(t *testing.T) {
	const size = 24 << 20
	for _, tc := range []struct {
		over          string
		rcvBuf, nbufs int
		fc            FlowControl
		progress      Progress
	}{
		{"shm", 0, 0, FlowCredit, ProgressInline}, {"iwarp", 0, 0, FlowCredit, ProgressInline},
		{"shm", 64 << 10, 0, FlowCredit, ProgressInline}, {"iwarp", 64 << 10, 0, FlowCredit, ProgressInline},
		{"shm", 0, 64, FlowCredit, ProgressInline}, {"iwarp", 0, 64, FlowCredit, ProgressInline},
		// The ring modes: a sender ahead of the peer's ChRcvBuf, and a
		// full ring whose acknowledgements came behind it.
		{"iwarp", 64 << 10, 0, FlowRDMA, ProgressInline}, {"iwarp", 0, 0, FlowRDMA, ProgressInline},
		{"iwarp", 64 << 10, 0, FlowNIC, ProgressAsync},
	} {
		cfg := DefaultConfig()
		cfg.ZCopyThreshold = 0
		cfg.RcvBuf = tc.rcvBuf
		if tc.nbufs > 0 {
			cfg.RecvBufs = tc.nbufs
		}
		cfg.FlowControl, cfg.Progress = tc.fc, tc.progress
		over := tc.over
		t.Run(fmt.Sprintf("%s/%v/%v/rcvbuf=%d/bufs=%d", over, tc.fc, tc.progress, tc.rcvBuf, cfg.RecvBufs), func(t *testing.T) {
			var a, p *Conn
			if over == "shm" {
				a, p, _, _, _, _ = shmPairRing(t, cfg, SameHostRing)
			} else {
				c := cfg
				c.SameHost = false
				a, p = connPair(t, c)
			}
			until := time.Now().Add(90 * time.Second)
			data := make([]byte, size)
			rand.New(rand.NewSource(9)).Read(data)
			served, sent := make(chan error, 1), make(chan error, 1)
			go func() { served <- echoBackPressure(t, p, until) }()
			go func() {
				err := sendMixed(t, a, data, rand.New(rand.NewSource(10)), until)
				if err == nil {
					err = shutWrite(a)
				}
				sent <- err
			}()
			got, err := recvAll(t, a, size, rand.New(rand.NewSource(11)), until)
			require.NoError(t, err)
			require.NoError(t, <-sent)
			require.NoError(t, <-served)
			require.True(t, bytes.Equal(data, got), "the echo differs")
		})
	}
}
