package iwarp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// burstSizes are the message sizes of a burst: one-FPDU messages, messages
// of several FPDUs, and small ones between them.
var burstSizes = []int{100, 70000, 3000, 200 << 10, 1, 64 << 10, 17000, 500 << 10}

// burst has a send n messages of burstSizes (each filled with the pattern
// whose seed is its MSN) while b receives them, holding up to hold segments
// unreleased across later reads. Before a segment is released its bytes are
// checked, so a chunk reused while a segment still points into it fails.
// It returns the largest chunk b held and the chunks the segments came from.
func burst(t *testing.T, a, b *peer, n, hold int) (maxHeld int, chunks map[*RxChunk]bool) {
	t.Helper()
	chunks = map[*RxChunk]bool{}
	total := 0
	for i := 0; i < n; i++ {
		size := burstSizes[i%len(burstSizes)]
		a.qp.PostSend(OpSend, pattern(size, byte(a.qp.sendMSN[0])))
		total += size
	}
	var held []Segment
	check := func() {
		for i := range held {
			s := &held[i]
			seed := byte(s.MSN)
			for k, c := range s.Payload {
				j := int(s.MO) + k
				if c != seed+byte(j*7)+byte(j>>9) {
					t.Fatalf("message %d octet %d changed while its segment was held", s.MSN, j)
				}
			}
			s.Release()
		}
		held = held[:0]
	}
	got := 0
	deadline := time.Now().Add(testTimeout)
	for got < total {
		require.True(t, time.Now().Before(deadline), "timed out: %d of %d octets", got, total)
		if err := a.qp.Flush(); err != nil {
			require.ErrorIs(t, err, unix.EAGAIN)
		}
		_, err := b.qp.Fill()
		if err == unix.EAGAIN {
			require.Zero(t, b.qp.RxHeld()%rxSmallChunk, "whole chunks only")
			pfd := []unix.PollFd{{Fd: int32(b.qp.Fd()), Events: unix.POLLIN}, {Fd: int32(a.qp.Fd()), Events: unix.POLLOUT}}
			if a.qp.TxPending() == 0 {
				pfd[1].Events = 0
			}
			_, err := unix.Poll(pfd, 100)
			if err != nil && err != unix.EINTR {
				t.Fatal(err)
			}
			continue
		}
		require.NoError(t, err)
		maxHeld = max(maxHeld, b.qp.RxHeld())
		for {
			seg, err := b.qp.NextSegment()
			if err == ErrNeedMore {
				break
			}
			require.NoError(t, err)
			require.Equal(t, OpSend, seg.Opcode())
			chunks[seg.chunk] = true
			got += len(seg.Payload)
			held = append(held, seg)
			if len(held) >= hold {
				check()
			}
		}
		maxHeld = max(maxHeld, b.qp.RxHeld())
	}
	check()
	require.Equal(t, total, got)
	return maxHeld, chunks
}

// A QP reads a burst in large chunks, and once the socket has nothing more
// it holds no chunk at all; every chunk's references are all released.
func TestRxChunkIdleAfterBurst(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := largePair(t, o)
		require.LessOrEqual(t, b.qp.RxHeld(), rxSmallChunk, "the MPA exchange is read into a small chunk")
		maxHeld, chunks := burst(t, a, b, 24, 5)
		require.Equal(t, rxChunkSize, maxHeld, "a bulk stream is read into large chunks")
		_, err := b.qp.Fill()
		require.ErrorIs(t, err, unix.EAGAIN)
		require.Zero(t, b.qp.RxHeld(), "idle: no receive chunk held")
		for c := range chunks {
			require.Zero(t, c.refs, "every reference released")
		}

		// Small messages afterwards: after the first read (which may
		// still expect bulk), they are read into a small chunk, given
		// back whenever the socket is empty.
		small := 0
		for i := 0; i < 50; i++ {
			a.qp.PostSend(OpSend, pattern(200, byte(i)))
			a.flushAll(t)
			waitArrived(t, b, 1)
			deadline := time.Now().Add(testTimeout)
			for got := 0; got < 200; {
				require.True(t, time.Now().Before(deadline), "timed out")
				_, err := b.qp.Fill()
				if err == unix.EAGAIN {
					waitFd(t, b.qp.Fd(), unix.POLLIN, 100)
					continue
				}
				require.NoError(t, err)
				if i > 0 {
					small = max(small, b.qp.RxHeld())
				}
				for {
					seg, err := b.qp.NextSegment()
					if err == ErrNeedMore {
						break
					}
					require.NoError(t, err)
					require.Equal(t, pattern(200, byte(i)), seg.Payload)
					got += len(seg.Payload)
					seg.Release()
				}
			}
			// Read until the socket is empty, as an engine does.
			_, err := b.qp.Fill()
			require.ErrorIs(t, err, unix.EAGAIN)
			require.Zero(t, b.qp.RxHeld())
		}
		require.Equal(t, rxSmallChunk, small, "small messages are read into a small chunk")
		_, err = b.qp.Fill()
		require.ErrorIs(t, err, unix.EAGAIN)
		require.Zero(t, b.qp.RxHeld())
	})
}

// A partial FPDU held while the socket is empty keeps only a small chunk;
// the FPDU is whole and right once the rest arrives.
func TestRxChunkIdleWithPartialFPDU(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := largePair(t, o)
		data := pattern(a.qp.MULPDU()-DDPUntaggedHeaderLen, 3)
		a.qp.PostSend(OpSend, data)
		out := a.qp.pendingWire()
		a.qp.txoff = len(a.qp.txbuf)
		require.NoError(t, a.qp.Flush())
		const cut = 1000
		writeAll(t, a.qp.Fd(), out[:cut])
		waitArrived(t, b, cut)
		n, err := b.qp.Fill()
		require.NoError(t, err)
		require.Equal(t, cut, n)
		_, err = b.qp.NextSegment()
		require.ErrorIs(t, err, ErrNeedMore)
		require.Equal(t, rxChunkSize, b.qp.RxHeld(), "room made for the whole FPDU")
		_, err = b.qp.Fill()
		require.ErrorIs(t, err, unix.EAGAIN)
		require.Equal(t, rxSmallChunk, b.qp.RxHeld(), "idle with 1000 octets pending: a small chunk")
		require.Equal(t, cut, b.qp.Buffered())
		writeAll(t, a.qp.Fd(), out[cut:])
		run(t, a, b, func() bool { return len(b.segs) == 1 || b.err != nil })
		require.NoError(t, b.err)
		require.Equal(t, data, b.segs[0].Payload)
	})
}

// Several QPs at once share the chunk pools; with segments held across
// reads, no chunk is reused while referenced (the race detector watches
// the copies into chunks, burst the bytes).
func TestRxChunkConcurrentQPs(t *testing.T) {
	for p := 0; p < 4; p++ {
		t.Run(string(rune('a'+p)), func(t *testing.T) {
			t.Parallel()
			a, b := largePair(t, pairOpts{markers: p%2 == 0, crc: true})
			for r := 0; r < 3; r++ {
				burst(t, a, b, 16, 1+p*3)
			}
		})
	}
}
