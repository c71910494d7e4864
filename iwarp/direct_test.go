package iwarp

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// largePair is a pair whose FPDUs are as large as loopback's MSS allows
// (about 64 KiB), so that one FPDU spans several reads.
func largePair(t *testing.T, o pairOpts) (a, b *peer) {
	t.Helper()
	a, b, _, _ = negotiatedPair(t, MPAConfig{Markers: o.markers, CRC: o.crc}, MPAConfig{Markers: o.markers, CRC: o.crc})
	require.Greater(t, a.qp.MULPDU(), 16000, "loopback MSS")
	return a, b
}

// writeAll writes b to fd, waiting for room.
func writeAll(t *testing.T, fd int, b []byte) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EAGAIN || err == unix.EINTR {
			require.True(t, time.Now().Before(deadline), "timed out writing")
			waitFd(t, fd, unix.POLLOUT, 100)
			continue
		}
		require.NoError(t, err)
		b = b[n:]
	}
}

// sendSplit sends what a has queued in two writes: the first cut octets,
// which b reads (and finds an incomplete FPDU in), then the rest, after
// edit (if not nil) has changed them. The queue is then empty.
func sendSplit(t *testing.T, a, b *peer, cut int, edit func(rest []byte)) {
	t.Helper()
	out := a.qp.pendingWire()
	require.Greater(t, len(out), cut)
	a.qp.txoff = len(a.qp.txbuf)
	require.NoError(t, a.qp.Flush())
	writeAll(t, a.qp.Fd(), out[:cut])
	waitArrived(t, b, uint64(cut))
	// A QP awaiting a Read Response reads the headers apart (watchRead).
	for got := 0; got < cut; {
		n, err := b.qp.Fill()
		require.NoError(t, err)
		got += n
	}
	_, err := b.qp.NextSegment()
	require.ErrorIs(t, err, ErrNeedMore)
	if edit != nil {
		edit(out[cut:])
	}
	writeAll(t, a.qp.Fd(), out[cut:])
}

// An RDMA Write whose FPDU arrives in pieces is read into the region
// directly, whatever the cut: inside the headers' reach, on a marker, or
// past several markers.
func TestDirectPlacementWrite(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		for _, cut := range []int{24, 100, 511, 514, 1030, 3001} {
			t.Run(fmt.Sprint(cut), func(t *testing.T) {
				a, b := largePair(t, o)
				b.qp.SetRemoteEvents(true)
				region := make([]byte, 70000)
				s, err := b.qp.Register(region, AccessRemoteWrite)
				require.NoError(t, err)
				data := pattern(a.qp.MULPDU()-DDPTaggedHeaderLen, 9)
				a.qp.PostWrite(s, 1000, data)
				sendSplit(t, a, b, cut, nil)
				run(t, a, b, func() bool { return len(b.comps) > 0 || b.err != nil })
				require.NoError(t, b.err)
				require.Equal(t, []Completion{{Kind: CompWritePlaced, STag: s, TO: 1000, Len: len(data)}}, b.comps)
				require.True(t, bytes.Equal(data, region[1000:1000+len(data)]))
				require.Equal(t, make([]byte, 1000), region[:1000])
				require.Equal(t, uint64(len(data)), b.qp.DirectPlaced(), "placed from the socket, not the chunk")
				require.Equal(t, uint64(1), b.qp.RxStats().FPDUs)
				require.Equal(t, a.qp.TxStats().Markers, b.qp.RxStats().Markers)
				// The stream continues in step after it.
				a.qp.PostSend(OpSend, []byte("next"))
				run(t, a, b, func() bool { return len(b.segs) > 0 || b.err != nil })
				require.NoError(t, b.err)
				require.Equal(t, "next", string(b.segs[0].Payload))
			})
		}
	})
}

// A Read Response is placed into the requester's sink directly too.
func TestDirectPlacementReadResponse(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := largePair(t, o)
		n := a.qp.MULPDU() - DDPTaggedHeaderLen // one FPDU
		src := pattern(n, 4)
		ss, err := a.qp.Register(src, AccessRemoteRead)
		require.NoError(t, err)
		sink := make([]byte, n)
		sk, err := b.qp.Register(sink, AccessLocalWrite)
		require.NoError(t, err)
		id, err := b.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sk), Size: uint32(n), SrcSTag: uint32(ss)})
		require.NoError(t, err)
		b.flushAll(t)
		// a answers; its Read Response goes out in two pieces.
		waitArrived(t, a, uint64(b.qp.TxStats().Bytes))
		_, err = a.qp.Fill()
		require.NoError(t, err)
		_, err = a.qp.NextSegment()
		require.ErrorIs(t, err, ErrNeedMore)
		sendSplit(t, a, b, 200, nil)
		run(t, a, b, func() bool { return len(b.comps) > 0 || b.err != nil })
		require.NoError(t, b.err)
		require.Equal(t, []Completion{{Kind: CompReadDone, ID: id, STag: sk, Len: n}}, b.comps)
		require.True(t, bytes.Equal(src, sink))
		require.Equal(t, uint64(n), b.qp.DirectPlaced())
	})
}

// A directly placed FPDU whose CRC or marker is wrong ends the connection
// with the MPA error, completes nothing, and leaves every octet outside
// the checked [TO, TO+len) as it was.
func TestDirectPlacementFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		markers bool
		code    uint8
		edit    func(rest []byte)
	}{
		{"payload octet flipped", true, MPAErrCRC, func(r []byte) { r[5000] ^= 0x10 }},
		{"CRC flipped", false, MPAErrCRC, func(r []byte) { r[len(r)-1] ^= 1 }},
		{"marker changed", true, MPAErrMarker, func(r []byte) {
			// The marker at stream offset 1024 (the FPDU starts at 0).
			r[1024-300+3] ^= 4
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := largePair(t, pairOpts{c.markers, true})
			b.qp.SetRemoteEvents(true)
			region := pattern(70000, 77)
			before := append([]byte(nil), region...)
			s, err := b.qp.Register(region, AccessRemoteWrite)
			require.NoError(t, err)
			data := make([]byte, 30000)
			a.qp.PostWrite(s, 2000, data)
			sendSplit(t, a, b, 300, c.edit)
			run(t, a, b, func() bool { return b.err != nil })
			require.ErrorIs(t, b.err, &Error{Layer: LayerMPA, Code: c.code})
			require.Empty(t, b.comps, "no completion for a failed placement")
			require.Zero(t, b.qp.DirectPlaced())
			require.Equal(t, before[:2000], region[:2000])
			require.Equal(t, before[32000:], region[32000:])
			if c.code == MPAErrCRC {
				require.Equal(t, uint64(1), b.qp.RxStats().CRCErrors)
			}
			// The Terminate names the layer, the code and the segment.
			var e *Error
			require.True(t, errors.As(b.err, &e))
			b.qp.PostTerminate(e)
			run(t, a, b, func() bool { return len(a.segs) > 0 || a.err != nil })
			require.NoError(t, a.err)
			term, err := ParseTerminate(a.segs[0].Payload)
			require.NoError(t, err)
			require.Equal(t, LayerMPA, term.Layer)
			require.Equal(t, c.code, term.Code)
			require.True(t, term.M)
			require.Equal(t, uint32(s), DDPHeader(term.DDPHeader).STag())
		})
	}
}

// A large write that fails a check is not placed directly: it faults in
// the chunk, and the region keeps every octet.
func TestDirectPlacementDeclinesBadAccess(t *testing.T) {
	for _, c := range []struct {
		name string
		acc  Access
		to   uint64
		want Error
	}{
		{"out of bounds", AccessRemoteWrite, 50000, Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrBaseBounds}},
		{"no right", AccessRemoteRead, 0, Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrAccessRights}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := largePair(t, pairOpts{true, true})
			region := pattern(70000, 5)
			before := append([]byte(nil), region...)
			s, err := b.qp.Register(region, c.acc)
			require.NoError(t, err)
			a.qp.PostWrite(s, c.to, make([]byte, 30000))
			sendSplit(t, a, b, 100, nil)
			run(t, a, b, func() bool { return b.err != nil })
			require.ErrorIs(t, b.err, &c.want)
			require.Equal(t, before, region)
			require.Zero(t, b.qp.DirectPlaced())
		})
	}
}

// With direct placement off, the same transfer is staged in the chunk.
func TestDirectPlacementOff(t *testing.T) {
	a, b := largePair(t, pairOpts{true, true})
	b.qp.SetDirectPlacement(false)
	region := make([]byte, 70000)
	s, err := b.qp.Register(region, AccessRemoteWrite)
	require.NoError(t, err)
	data := pattern(40000, 1)
	a.qp.PostWrite(s, 0, data)
	sendSplit(t, a, b, 100, nil)
	run(t, a, b, func() bool { return bytes.Equal(region[:40000], data) || b.err != nil })
	require.NoError(t, b.err)
	require.Zero(t, b.qp.DirectPlaced())
}

// A region invalidated while its FPDU is being placed directly gets no
// octet after the invalidation; the FPDU then fails the STag check, as a
// staged one would, and completes nothing.
func TestDirectPlacementInvalidatedMidway(t *testing.T) {
	a, b := largePair(t, pairOpts{true, true})
	b.qp.SetRemoteEvents(true)
	region := make([]byte, 70000)
	s, err := b.qp.Register(region, AccessRemoteWrite)
	require.NoError(t, err)
	data := pattern(40000, 3)
	a.qp.PostWrite(s, 0, data)
	out := a.qp.pendingWire()
	a.qp.txoff = len(a.qp.txbuf)
	require.NoError(t, a.qp.Flush())
	parts := [][]byte{out[:100], out[100:20000], out[20000:]}
	for i, p := range parts {
		writeAll(t, a.qp.Fd(), p)
		got := 0
		deadline := time.Now().Add(testTimeout)
		for got < len(p) {
			require.True(t, time.Now().Before(deadline))
			waitFd(t, b.qp.Fd(), unix.POLLIN, 100)
			n, err := b.qp.Fill()
			if err == unix.EAGAIN {
				continue
			}
			require.NoError(t, err)
			got += n
		}
		_, err := b.qp.NextSegment()
		if i < 2 {
			require.ErrorIs(t, err, ErrNeedMore)
		}
		if i == 1 {
			require.True(t, b.qp.direct.active, "placing directly")
			require.True(t, b.qp.Invalidate(s))
		}
		if i == 2 {
			require.ErrorIs(t, err, &Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrInvalidSTag})
		}
	}
	// The octets that arrived after the invalidation are not in the region.
	wire0 := 20000 - 4 - 2 - DDPTaggedHeaderLen // payload octets before the third part, less markers
	require.Equal(t, make([]byte, len(region)-wire0), region[wire0:])
	require.Empty(t, b.qp.PollCompletions(nil))
	require.Zero(t, b.qp.DirectPlaced())
}
