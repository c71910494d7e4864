package iwarp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/internal/testnet"
)

// mtuPair is qpPair over a loopback connection whose segments are cut as
// for a 1500-octet MTU (TCP_MAXSEG), FPDUs cut for the socket's MSS.
func mtuPair(t *testing.T, o pairOpts) (a, b *peer) {
	cfd, afd := testnet.TCPPairMSS(t, 1460)
	a, b = qpPairOn(t, o, cfd, afd, 0)
	require.True(t, a.qp.runs && b.qp.runs, "MSS %d and %d", a.qp.emss, b.qp.emss)
	return a, b
}

// TestFPDUsFillSegments: with FPDUs aligned, a message longer than one
// segment is cut into FPDUs that each fill a segment of the MSS exactly
// (only the last is shorter), and the message goes to the kernel in
// records of up to 64 KiB, which it cuts at the same places. Were each
// FPDU its own record, every FPDU would travel as its own packet (about
// 1400 octets) through both TCP stacks.
func TestFPDUsFillSegments(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := mtuPair(t, o)
		mss := a.qp.emss
		msg := pattern(300<<10, 3)
		records, fpdus := a.qp.TxRecords(), a.qp.TxStats().FPDUs
		a.qp.PostSend(OpSend, msg)
		prev := 0
		for i, end := range a.qp.txEnds {
			if i < len(a.qp.txEnds)-1 {
				require.Equal(t, mss, end-prev, "FPDU %d of %d", i, len(a.qp.txEnds))
			} else {
				require.LessOrEqual(t, end-prev, mss)
			}
			prev = end
		}
		n := a.qp.TxStats().FPDUs - fpdus
		require.Equal(t, uint64(len(a.qp.txEnds)), n)
		// Records of up to maxRecord octets: 46 FPDUs of 1448 each.
		per := uint64(maxRecord/mss + 1)
		want := (n + per - 1) / per
		require.LessOrEqual(t, n, uint64(len(msg)/(mss-64)+1), "FPDUs carry too little")
		run(t, a, b, func() bool { return len(b.segs) > 0 && b.segs[len(b.segs)-1].Last })
		got, _ := message(t, b.segs, 0)
		require.Equal(t, msg, got)
		require.Equal(t, records+want, a.qp.TxRecords(), "%d FPDUs", n)
	})
}

// TestSegmentFit: at every stream position the ULPDU chosen for a full
// FPDU makes it exactly one segment long, or falls back to the MULPDU (the
// FPDU then ends its record); never longer than the segment. Only for a
// small segment size that is the kernel's own and a multiple of 4: over
// loopback TCP_MAXSEG starts at half the peer's first window (32 KiB) and
// grows, so FPDUs cut for it would not stay aligned (and an MSS a program
// merely says, as iwarp/internal/allops does, is not what the kernel cuts).
func TestSegmentFit(t *testing.T) {
	for _, tc := range []struct {
		markers bool
		clamp   int // TCP_MAXSEG before the handshake (0: loopback's)
		mss     int // given to StartFullOperation (0: the socket's)
		exact   bool
	}{
		{true, 1460, 0, true}, {false, 1460, 0, true}, {true, 9012, 0, true},
		{true, 1462, 0, false}, {true, 0, 0, false}, {true, 0, 1448, false},
	} {
		cfd, _ := testnet.TCPPairMSS(t, tc.clamp)
		q := NewQP(cfd)
		q.StartFullOperation(tc.markers, tc.markers, true, DefaultMarkerSpacing, tc.mss)
		w := q.emss
		require.Equal(t, tc.exact, q.runs, "%+v: MSS %d", tc, w)
		fits := 0
		for pos := uint64(0); pos < 4*DefaultMarkerSpacing; pos += 4 {
			require.NoError(t, q.tx.SetPos(pos))
			u := q.segmentFit()
			require.GreaterOrEqual(t, u, q.MULPDU())
			wire := q.tx.WireLen(u)
			require.LessOrEqual(t, wire, w, "%+v, position %d: ULPDU %d", tc, pos, u)
			if wire == w {
				fits++
			} else {
				require.Equal(t, q.MULPDU(), u)
			}
		}
		if tc.exact {
			require.Greater(t, fits, 4*DefaultMarkerSpacing/4*9/10, "%+v: too few exact fits", tc)
		} else if w%4 != 0 || w > maxRunSegment {
			require.Zero(t, fits, "%+v", tc)
		}
		q.SetAlign(false)
		require.Equal(t, q.MULPDU(), q.segmentFit())
	}
}

// TestUnalignedAnswersManyReads: a QP that lets the kernel merge FPDUs
// (SetAlign(false)) forgets each Read Response once it is written, as an
// aligned one does, so Reads issued one after another never count against
// its IRD (they once did, and the read after the IRD'th ended the stream).
func TestUnalignedAnswersManyReads(t *testing.T) {
	a, b := qpPair(t, pairOpts{true, true})
	b.qp.SetAlign(false)
	src := pattern(20000, 9)
	srcTag, err := b.qp.Register(src, AccessRemoteRead)
	require.NoError(t, err)
	sink := make([]byte, len(src))
	sinkTag, err := a.qp.Register(sink, AccessLocalWrite)
	require.NoError(t, err)
	for i := range 3 * DefaultIRD {
		clear(sink)
		_, err := a.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sinkTag), Size: uint32(len(src)), SrcSTag: uint32(srcTag)})
		require.NoError(t, err, "read %d", i)
		run(t, a, b, func() bool { return len(a.comps) == i+1 || a.err != nil || b.err != nil })
		require.NoError(t, a.err, "read %d", i)
		require.NoError(t, b.err, "read %d", i)
		require.Equal(t, CompReadDone, a.comps[i].Kind)
		require.Equal(t, src, sink, "read %d", i)
	}
}

// TestLargeMessageOneAllocation: a message of megabytes (a Read Response
// answering a zero-copy read of 4 MiB) is framed into a transmit buffer
// allocated at most once. Grown FPDU by FPDU, the buffer was copied some
// twenty times per message (five times its size allocated), and as a
// buffer over 4 MiB is not kept after Flush, again for every message: the
// sender spent its time copying and 4 MiB messages went at a fifth of the
// speed of 2 MiB ones.
func TestLargeMessageOneAllocation(t *testing.T) {
	for _, tc := range []struct {
		markers bool
		emss    int
	}{{true, 65483}, {false, 65483}, {true, 1448}, {false, 1448}, {true, 536}} {
		q := NewQP(-1)
		q.StartFullOperation(tc.markers, tc.markers, true, DefaultMarkerSpacing, tc.emss)
		msg := pattern(4<<20, 1)
		const runs = 4
		size, used := 0, 0
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range runs {
			q.PostSend(OpSend, msg)
			size, used = cap(q.txbuf), len(q.txbuf)
			q.txDone() // all written: a buffer this large is not kept
		}
		runtime.ReadMemStats(&m1)
		require.Greater(t, size, txShrinkAbove)
		require.Less(t, size, used+used/20, "reserved too much: %d for %d", size, used)
		perMsg := (m1.TotalAlloc - m0.TotalAlloc) / runs
		require.Less(t, perMsg, uint64(used+used/5), "markers %t, emss %d: %d octets allocated per message of %d", tc.markers, tc.emss, perMsg, used)
	}
}

// TestWatchedReadsOverSmallMSS: while RDMA Writes into a watched region
// are expected, reads stop at FPDU boundaries (so direct placement can
// take the payload from the socket) only where FPDUs are large. Over a
// 1500-octet MTU that was two system calls per 1.4 KB FPDU, and made a
// 1 MiB ping-pong between two namespaces 3× slower than copying.
func TestWatchedReadsOverSmallMSS(t *testing.T) {
	for _, emss := range []int{536, 1448, 9000, watchMinSegment, 65483} {
		q := NewQP(-1)
		q.StartFullOperation(true, true, true, DefaultMarkerSpacing, emss)
		require.Zero(t, q.watchRead(), "emss %d: nothing watched", emss)
		q.WatchWrites(STag(0x100))
		if emss < watchMinSegment {
			require.Zero(t, q.watchRead(), "emss %d", emss)
		} else {
			require.Positive(t, q.watchRead(), "emss %d", emss)
		}
	}
}

// TestGatherRecordEndsAtFPDU: when a record sent from registered memory
// needs more iovecs than one sendmsg takes, the call ends at the last whole
// FPDU, never inside one: the kernel sends what one call leaves at the
// end of a record as a short segment, and every segment after it would
// start inside an FPDU (seen as 3 in 4 FPDUs misaligned over veth).
func TestGatherRecordEndsAtFPDU(t *testing.T) {
	a, _ := mtuPair(t, pairOpts{true, true})
	q := a.qp
	src := pattern(1<<20, 4)
	q.PostWriteGather(STag(0x1234), 0, src)
	require.NotEmpty(t, q.holes)
	frames := append([]int(nil), q.txEnds...)
	q.giov = q.giov[:0]
	reached := q.gatherIov(q.txoff, frames[len(frames)-1], maxIov)
	require.Less(t, reached, frames[len(frames)-1], "1 MiB in %d-octet FPDUs needs more than %d iovecs", q.emss, maxIov)
	cut := q.lastFrameEnd(reached)
	require.Contains(t, frames, cut)
	require.LessOrEqual(t, cut, reached)
	require.Zero(t, cut%q.emss, "a run of FPDUs that fill segments ends on a segment boundary")
	for _, e := range frames {
		require.False(t, e > cut && e <= reached, "frame end %d lies between the cut %d and %d", e, cut, reached)
	}
	require.Zero(t, q.lastFrameEnd(frames[0]-1), "no whole frame")
}
