package sdpcore

import (
	"bytes"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSinkOneCopy: messages that wait whole in the ring go from it
// straight into the receive's buffer: one receive returns them all, and
// only the short last FPDUs of messages are copied out of the receive
// chunk (UserCopiesRx), not the payload.
func TestSinkOneCopy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Markers, cfg.CRC = false, false
	a, p, _, _, _, _ := shmPairRing(t, cfg, 1<<20)
	oneWay(t, p, a, 1000) // the set-up exchange is over, credits granted
	oneWay(t, a, p, 1000)
	before := a.Stats()
	until := time.Now().Add(20 * time.Second)
	want := make([]byte, 256<<10)
	rand.New(rand.NewSource(3)).Read(want)
	require.NoError(t, sendBytes(t, p, want, 0, until))
	for p.Unsent() > 0 {
		require.True(t, time.Now().Before(until), "the sender keeps %d bytes", p.Unsent())
		runtime.Gosched()
	}
	buf := make([]byte, 1<<20)
	n, err := a.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, len(want), n, "one receive takes all the ring holds")
	require.True(t, bytes.Equal(want, buf[:n]))
	s := a.Stats()
	require.EqualValues(t, len(want), s.PayloadRx-before.PayloadRx)
	require.Less(t, s.UserCopiesRx-before.UserCopiesRx, uint64(4<<10), "payload copied out of the receive chunk")
	require.Greater(t, s.DirectPlacedRx-before.DirectPlacedRx, uint64(len(want)*3/4), "read from the ring straight into place")
	// The sender framed them straight into the ring, too.
	require.Greater(t, p.tr.(*qpTransport).qp().TxDirect(), uint64(len(want)*3/4))
}

// TestSinkScribbled: a stream of messages of every size read with buffers
// of every size, each buffer overwritten as soon as its bytes are taken:
// nothing queued for a later receive may still lie in the application's
// buffer (keepSunk), and nothing is lost, doubled or reordered.
func TestSinkScribbled(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Markers, cfg.CRC = false, false
	for _, ring := range []int{64 << 10, 1 << 20} {
		a, p, _, _, _, _ := shmPairRing(t, cfg, ring)
		until := time.Now().Add(60 * time.Second)
		rng := rand.New(rand.NewSource(int64(ring)))
		want := make([]byte, 8<<20)
		rng.Read(want)
		done := make(chan error, 1)
		go func() { done <- sendMixed(t, p, want, rand.New(rand.NewSource(5)), until) }()
		got := make([]byte, 0, len(want))
		buf := make([]byte, 512<<10)
		for i := 0; len(got) < len(want); i++ {
			require.Less(t, i, 1<<22)
			b := buf[:1+rng.Intn(len(buf))]
			if rng.Intn(3) == 0 {
				b = buf[:1+rng.Intn(4<<10)]
			}
			n, err := recvWait(t, a, b, 0, until)
			require.NoError(t, err)
			require.NotZero(t, n, "end of stream after %d of %d bytes", len(got), len(want))
			got = append(got, b[:n]...)
			for j := range b {
				b[j] = 0xa5
			}
		}
		require.NoError(t, <-done)
		require.True(t, bytes.Equal(want, got), "ring %d: the bytes differ", ring)
		s := a.Stats()
		require.Less(t, s.UserCopiesRx, s.PayloadRx, "ring %d: no payload went straight to the buffer", ring)
	}
}

// TestKeepSunk: a queued piece that still lies in the application's
// buffer when a receive ends is copied into the connection's memory.
func TestKeepSunk(t *testing.T) {
	c := &Conn{}
	app := []byte("payload in the application's buffer")
	want := append([]byte(nil), app...)
	c.rq = []piece{{data: []byte("private")}, {data: app, sunk: true}}
	c.keepSunk()
	for i := range app {
		app[i] = 0
	}
	require.Equal(t, want, c.rq[1].data)
	require.False(t, c.rq[1].sunk)
}
