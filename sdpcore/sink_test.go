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
	a, p := sinkPair(t)
	before := a.Stats()
	until := time.Now().Add(20 * time.Second)
	want := randomIntoRing(t, p, 256<<10, 3, until)
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

// sinkPair is a same-host pair without markers and CRC, its set-up
// exchange over and its credits granted both ways.
func sinkPair(t *testing.T) (a, p *Conn) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Markers, cfg.CRC = false, false
	a, p, _, _, _, _ = shmPairRing(t, cfg, 1<<20)
	oneWay(t, p, a, 1000)
	oneWay(t, a, p, 1000)
	return a, p
}

// randomIntoRing sends n random bytes (from seed) into the ring
// (sendIntoRing) and returns them.
func randomIntoRing(t *testing.T, p *Conn, n int, seed int64, until time.Time) []byte {
	t.Helper()
	data := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(data)
	sendIntoRing(t, p, data, 0, until)
	return data
}

// sendIntoRing sends data from p, flags as given, and waits (bounded)
// until p holds none of it: all of it lies in the ring.
func sendIntoRing(t *testing.T, p *Conn, data []byte, flags SendFlags, until time.Time) {
	t.Helper()
	require.NoError(t, sendBytes(t, p, data, flags, until))
	for p.Unsent() > 0 {
		require.True(t, time.Now().Before(until), "the sender keeps %d bytes", p.Unsent())
		runtime.Gosched()
	}
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

// recvFilling is the shim's recv into b: a receive, then, after a short
// one, receives that take what else is here (RecvFill) until b is full or
// one finds nothing.
func recvFilling(t *testing.T, c *Conn, b []byte) int {
	t.Helper()
	n, err := c.Recv([][]byte{b}, 0, time.Now())
	require.NoError(t, err)
	for i := 0; n > 0 && n < len(b); i++ {
		require.Less(t, i, 1<<16)
		k, err := c.Recv([][]byte{b[n:]}, RecvFill, time.Now())
		if err == ErrWouldBlock || k == 0 {
			break
		}
		require.NoError(t, err)
		n += k
	}
	return n
}

// pollLook is poll()'s look at c for want (the shim's SDP_POLL_SLEEP
// without SDP_POLL_BLOCK), ending the sleep it counts at once.
func pollLook(t *testing.T, c *Conn, want Events) Events {
	t.Helper()
	ready, _, _, _, _, err := c.PollWaitOwn(want, time.Now(), false, false, -1)
	require.NoError(t, err)
	if ready&want == 0 {
		c.Woke()
	}
	return ready
}

// TestSinkAfterPollLook: the look of poll, select and a level-triggered
// epoll registration for POLLIN (and POLLPRI) stops at the first data, so
// that the receive after it reads the large messages still in the ring
// straight into its buffer; a look that also waits for room to send reads
// everything, as the credits it waits for may come behind the payload, and
// so does an edge-triggered registration's.
func TestSinkAfterPollLook(t *testing.T) {
	epollLook := func(level bool) func(*testing.T, *Conn, Events) Events {
		return func(t *testing.T, c *Conn, want Events) Events {
			ready, _, _, _, err := c.PollLook(want, time.Now(), false, true, level)
			require.NoError(t, err)
			return ready
		}
	}
	for _, tc := range []struct {
		name   string
		look   func(*testing.T, *Conn, Events) Events
		want   Events
		direct bool
	}{
		{"poll", pollLook, EvIn, true},
		{"poll", pollLook, EvIn | EvPri, true},
		{"poll", pollLook, EvIn | EvOut, false},
		{"poll", pollLook, EvIn | EvRdHup, false},
		{"epoll level-triggered", epollLook(true), EvIn, true},
		{"epoll level-triggered", epollLook(true), EvIn | EvOut, false},
		// An edge-triggered registration reports arrivals: its look
		// reads them all, so that none it has not reported waits unseen.
		{"epoll edge-triggered", epollLook(false), EvIn, false},
	} {
		a, p := sinkPair(t)
		before := a.Stats()
		until := time.Now().Add(20 * time.Second)
		want := randomIntoRing(t, p, 768<<10, 4, until)
		got := make([]byte, 0, len(want))
		buf := make([]byte, 1<<20)
		for i := 0; len(got) < len(want); i++ {
			require.Less(t, i, 1000, "%s %v: %d of %d bytes", tc.name, tc.want, len(got), len(want))
			require.True(t, time.Now().Before(until))
			if tc.look(t, a, tc.want)&EvIn == 0 {
				require.NoError(t, wait(t, a, EvIn, until))
				continue
			}
			got = append(got, buf[:recvFilling(t, a, buf)]...)
		}
		require.True(t, bytes.Equal(want, got), "%s %v: the bytes differ", tc.name, tc.want)
		s := a.Stats()
		placed, copied := s.DirectPlacedRx-before.DirectPlacedRx, s.UserCopiesRx-before.UserCopiesRx
		if tc.direct {
			require.Greater(t, placed, uint64(len(want)*3/4), "%s %v: read from the ring straight into place", tc.name, tc.want)
			require.Less(t, copied, uint64(len(want)/4), "%s %v: copied out of the receive chunk", tc.name, tc.want)
		} else {
			require.Less(t, placed, uint64(len(want)/4), "%s %v: the look left payload in the ring", tc.name, tc.want)
		}
	}
}

// TestUrgentNotLeftInRing: urgent data behind large messages reaches a
// look at once, as TCP's urgent pointer does: POLLPRI and the owner's
// SIGURG (OnUrgent) before the payload in front of it is read. The
// sender's first urgent send marks its ring (shm Prompt), and from then
// on the reader's looks and receives read everything that came.
func TestUrgentNotLeftInRing(t *testing.T) {
	a, p := sinkPair(t)
	until := time.Now().Add(20 * time.Second)
	for round := range 3 {
		bulk := make([]byte, 128<<10)
		rand.New(rand.NewSource(int64(round))).Read(bulk)
		require.NoError(t, sendBytes(t, p, bulk, 0, until))
		sendIntoRing(t, p, []byte("u"), SendOOB, until)
		// Everything is in the ring now: a look with data to report
		// must still see the urgent byte behind it.
		var ready Events
		for i := 0; ready&EvPri == 0; i++ {
			require.Less(t, i, 1000, "round %d: no POLLPRI (ready %v)", round, ready)
			require.True(t, time.Now().Before(until))
			if ready = pollLook(t, a, EvIn|EvPri); ready&EvIn == 0 {
				require.NoError(t, wait(t, a, EvIn, until))
			}
		}
		got := make([]byte, 0, len(bulk))
		buf := make([]byte, 1<<20)
		for i := 0; len(got) < len(bulk); i++ {
			require.Less(t, i, 1000)
			n, err := recvWait(t, a, buf, 0, until)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		require.True(t, bytes.Equal(bulk, got), "round %d: the bytes before the mark differ", round)
		require.True(t, a.AtMark(time.Now()))
		one := make([]byte, 1)
		n, err := a.RecvOOB(one, false, time.Now())
		require.NoError(t, err)
		require.Equal(t, "u", string(one[:n]))
	}
}

// TestLookLeavesWhatTheReceiveSinks: a look that only reads leaves a large
// Send in the ring only when the application's last receive could take it
// whole; then the Send, held whole by the ring, is what makes the
// connection readable, and the receive after the look reads it straight
// into place (iperf3 -l 16K: 16 KiB sends read 16 KiB at a time). After a
// smaller receive, the look reads on until the next receive has its fill
// and leaves the rest in the ring.
func TestLookLeavesWhatTheReceiveSinks(t *testing.T) {
	const size, count = 16 << 10, 12 // within the 16 credits of the set-up
	for _, rxBuf := range []int{size, 64} {
		a, p := sinkPair(t)
		until := time.Now().Add(20 * time.Second)
		buf := make([]byte, rxBuf)
		sendStr(t, p, string(make([]byte, rxBuf)), 0) // the receive that sets rxBuf
		n, err := recvWait(t, a, buf, 0, until)
		require.NoError(t, err)
		require.Equal(t, rxBuf, n)
		before := a.Stats()
		want := make([]byte, size*count)
		rand.New(rand.NewSource(6)).Read(want)
		for i := range count {
			sendIntoRing(t, p, want[i*size:(i+1)*size], 0, until)
		}
		ready := pollLook(t, a, EvIn)
		require.Equal(t, EvIn, ready&EvIn, "rxBuf %d: readable", rxBuf)
		if rxBuf == size {
			require.Zero(t, a.rqBytes, "the look left the Send in the ring")
		} else {
			// The receive cannot sink a Send: the look reads on, but
			// only until the next receive has its fill, leaving the
			// rest in the ring instead of in receive chunks.
			require.GreaterOrEqual(t, a.rqBytes, rxBuf, "the look read on")
			require.LessOrEqual(t, a.rqBytes, size, "the look read no further than the receive needs")
		}
		got := make([]byte, 0, len(want))
		for i := 0; len(got) < len(want); i++ {
			require.Less(t, i, 1<<16, "rxBuf %d: %d of %d bytes", rxBuf, len(got), len(want))
			require.True(t, time.Now().Before(until))
			if pollLook(t, a, EvIn)&EvIn == 0 {
				require.NoError(t, wait(t, a, EvIn, until))
				continue
			}
			got = append(got, buf[:recvFilling(t, a, buf)]...)
		}
		require.True(t, bytes.Equal(want, got), "rxBuf %d: the bytes differ", rxBuf)
		placed := a.Stats().DirectPlacedRx - before.DirectPlacedRx
		if rxBuf == size {
			require.Greater(t, placed, uint64(len(want)*3/4), "read from the ring straight into place")
		} else {
			require.Zero(t, placed)
		}
	}
}

// TestChunkSinkOverMarkers: over iWARP with markers (between hosts), a
// blocking receive that waits as the shim's does reads large messages from
// the receive chunk straight into its buffer over the markers, one pass
// where closing the markers' gaps in the chunk and the copy out made two:
// 2 MiB sent in 64 KiB sends arrive intact, and most of it placed directly.
// Without markers the chunk's copy out is that one pass already, and
// nothing is placed directly. A wait that is not a receive's (PollWait)
// still reads, and its data is queued.
func TestChunkSinkOverMarkers(t *testing.T) {
	for _, markers := range []bool{true, false} {
		t.Run(map[bool]string{true: "markers", false: "nomarkers"}[markers], func(t *testing.T) {
			cfg := testConfig()
			cfg.Markers = markers
			a, p := connPair(t, cfg)
			oneWay(t, a, p, 1) // both ends in Full Operation
			until := time.Now().Add(30 * time.Second)
			data := randBytes(2<<20, 5)
			done := sendPieces(t, a, data, 64<<10, until)
			got := make([]byte, 0, len(data))
			buf := make([]byte, 128<<10)
			for i := 0; len(got) < len(data); i++ {
				require.Less(t, i, 100000, "no progress")
				n, err := p.Recv([][]byte{buf}, RecvBlock, time.Now())
				if err == ErrWouldBlock {
					require.NoError(t, waitLook(t, p, EvIn, until, true))
					continue
				}
				require.NoError(t, err)
				require.NotZero(t, n, "end of stream after %d bytes", len(got))
				got = append(got, buf[:n]...)
			}
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(data, got), "the bytes received differ from those sent")
			placed := p.Stats().DirectPlacedRx
			t.Logf("%d of %d bytes placed directly", placed, len(data))
			if markers {
				require.Greater(t, placed, uint64(len(data))*3/4, "read from the chunk straight into place")
			} else {
				require.Zero(t, placed)
			}

			// A wait of poll's (not a receive's) reads the FPDUs itself
			// (Stats, unlike Queued, reads nothing).
			before := p.Stats().Rx.FPDUs
			require.NoError(t, sendBytes(t, a, data[:64<<10], 0, until))
			require.NoError(t, wait(t, p, EvIn, until))
			require.Greater(t, p.Stats().Rx.FPDUs, before, "the poll-style wait read nothing")
		})
	}
}

// TestBackgroundLeavesTheRing: Background, which a send schedules when it
// leaves work behind, reads nothing once that work is done (the
// application's own calls may have done it): what came meanwhile stays in
// the ring for the application's receive, which takes it in one copy,
// instead of going into receive chunks ahead of it (a fresh curl made and
// populated four 256 KiB chunks for a 2 MiB response that way).
func TestBackgroundLeavesTheRing(t *testing.T) {
	a, p := sinkPair(t)
	until := time.Now().Add(20 * time.Second)
	const size = 64 << 10
	want := randomIntoRing(t, p, 4*size, 9, until)
	require.False(t, a.bgWork(), "no work left behind")
	a.Background(time.Second)
	require.Zero(t, a.rqBytes, "Background read what came")
	before := a.Stats()
	buf := make([]byte, size)
	got := make([]byte, 0, len(want))
	for i := 0; len(got) < len(want); i++ {
		require.Less(t, i, 1<<16, "%d of %d bytes", len(got), len(want))
		n, err := recvWait(t, a, buf, 0, until)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.True(t, bytes.Equal(want, got), "the bytes differ")
	placed := a.Stats().DirectPlacedRx - before.DirectPlacedRx
	require.Greater(t, placed, uint64(len(want)/2), "read from the ring straight into place")
}
