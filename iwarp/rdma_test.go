package iwarp

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// One loopback test per RDMAP opcode, each in every framing mode, then the
// hostile cases: each must end in a fault with the RFC classification,
// leave the target memory untouched, and reach the peer as a Terminate that
// names the offending segment.

func TestLoopbackSend(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		big := pattern(100000, 3) // many segments at MULPDU 1430
		a.qp.PostSend(OpSend, []byte("hello"), []byte(", "), []byte("world"))
		a.qp.PostSend(OpSendSE, big[:40000], big[40000:])
		a.qp.PostSend(OpSend) // zero-length Send: one segment, L=1
		run(t, a, b, func() bool { return len(b.segs) > 0 && b.segs[len(b.segs)-1].MSN == 3 && b.segs[len(b.segs)-1].Last })
		m, i := message(t, b.segs, 0)
		require.Equal(t, "hello, world", string(m))
		require.Equal(t, OpSend, b.segs[0].Opcode())
		m, i = message(t, b.segs, i)
		require.True(t, bytes.Equal(big, m), "reassembled Send differs")
		require.Equal(t, OpSendSE, b.segs[i-1].Opcode())
		require.Greater(t, i, 3, "a 100000-octet Send spans many segments")
		m, i = message(t, b.segs, i)
		require.Empty(t, m)
		require.Equal(t, len(b.segs), i)
		require.NoError(t, b.err)
		require.Equal(t, o.markers, b.qp.RxStats().Markers > 0)
	})
}

func TestLoopbackSendInvalidate(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		b.qp.SetRemoteEvents(true)
		buf1, buf2 := make([]byte, 64), make([]byte, 64)
		s1, err := b.qp.Register(buf1, AccessRemoteWrite|AccessRemoteInvalidate)
		require.NoError(t, err)
		s2, err := b.qp.Register(buf2, AccessRemoteRead|AccessRemoteInvalidate)
		require.NoError(t, err)
		a.qp.PostSendInvalidate(false, s1, []byte("done with 1"))
		a.qp.PostSendInvalidate(true, s2, pattern(5000, 1))
		run(t, a, b, func() bool { return len(b.comps) == 2 })
		require.NoError(t, b.err)
		m, i := message(t, b.segs, 0)
		require.Equal(t, "done with 1", string(m))
		require.Equal(t, OpSendInvalidate, b.segs[0].Opcode())
		require.Equal(t, uint32(s1), b.segs[0].InvalidateSTag)
		m, _ = message(t, b.segs, i)
		require.Equal(t, pattern(5000, 1), m)
		require.Equal(t, OpSendSEInvalidate, b.segs[i].Opcode())
		require.False(t, b.qp.Mem().Valid(s1))
		require.False(t, b.qp.Mem().Valid(s2))
		require.Equal(t, []Completion{{Kind: CompInvalidated, STag: s1}, {Kind: CompInvalidated, STag: s2}}, b.comps)
	})
}

func TestLoopbackRDMAWrite(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		b.qp.SetRemoteEvents(true)
		region := make([]byte, 200000)
		stag, err := b.qp.Register(region, AccessRemoteWrite)
		require.NoError(t, err)
		data := pattern(150001, 9)
		a.qp.PostWrite(stag, 1000, data[:70000], data[70000:])
		a.qp.PostWrite(stag, 0, []byte("head"))
		a.qp.PostWrite(stag, 5) // zero length
		a.qp.PostSend(OpSend, []byte("written"))
		run(t, a, b, func() bool { return len(b.segs) == 1 })
		require.NoError(t, b.err)
		require.Equal(t, "written", string(b.segs[0].Payload))
		require.Equal(t, data, region[1000:1000+len(data)])
		require.Equal(t, "head", string(region[:4]))
		require.Equal(t, make([]byte, 1000-4), region[4:1000], "octets outside the writes stay untouched")
		require.Equal(t, make([]byte, len(region)-1000-len(data)), region[1000+len(data):])
		require.Equal(t, []Completion{
			{Kind: CompWritePlaced, STag: stag, TO: 1000, Len: len(data)},
			{Kind: CompWritePlaced, STag: stag, TO: 0, Len: 4},
			{Kind: CompWritePlaced, STag: stag, TO: 5, Len: 0},
		}, b.comps)
	})
}

func TestLoopbackRDMARead(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		b.qp.SetRemoteEvents(true)
		src := pattern(300000, 5)
		srcTag, err := b.qp.Register(src, AccessRemoteRead)
		require.NoError(t, err)
		sink := make([]byte, 300000)
		sinkTag, err := a.qp.Register(sink, AccessLocalWrite)
		require.NoError(t, err)
		a.qp.SetReadLimits(DefaultIRD, 3)
		var ids []uint64
		for i, r := range []ReadRequest{
			{SinkSTag: uint32(sinkTag), SinkTO: 0, Size: 100000, SrcSTag: uint32(srcTag), SrcTO: 200000},
			{SinkSTag: uint32(sinkTag), SinkTO: 100000, Size: 7, SrcSTag: uint32(srcTag), SrcTO: 0},
			{SinkSTag: uint32(sinkTag), SinkTO: 200000, Size: 0, SrcSTag: 0x1234, SrcTO: 0}, // zero-length: no STag is checked
		} {
			id, err := a.qp.PostReadRequest(r)
			require.NoError(t, err, "read %d", i)
			ids = append(ids, id)
		}
		_, err = a.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sinkTag), Size: 1, SrcSTag: uint32(srcTag)})
		require.ErrorIs(t, err, ErrORDExceeded)
		require.Equal(t, 3, a.qp.OutstandingReads())
		run(t, a, b, func() bool { return len(a.comps) == 3 })
		require.NoError(t, a.err)
		require.NoError(t, b.err)
		require.Equal(t, []Completion{
			{Kind: CompReadDone, ID: ids[0], STag: sinkTag, TO: 0, Len: 100000},
			{Kind: CompReadDone, ID: ids[1], STag: sinkTag, TO: 100000, Len: 7},
			{Kind: CompReadDone, ID: ids[2], STag: sinkTag, TO: 200000, Len: 0},
		}, a.comps)
		require.Equal(t, src[200000:], sink[:100000])
		require.Equal(t, src[:7], sink[100000:100007])
		require.Equal(t, make([]byte, len(sink)-100007), sink[100007:])
		require.Equal(t, 0, a.qp.OutstandingReads())
		require.Len(t, b.comps, 3)
		require.Equal(t, CompReadAnswered, b.comps[0].Kind)
		require.Empty(t, b.segs, "Read Requests are answered inside the QP")

		// The ORD is free again.
		_, err = a.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sinkTag), Size: 1, SrcSTag: uint32(srcTag)})
		require.NoError(t, err)
	})
}

func TestLoopbackImmediate(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		a.qp.PostImmediate(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		a.qp.PostSend(OpSend, []byte("between"))
		a.qp.PostImmediate(true, [8]byte{8, 7, 6, 5, 4, 3, 2, 1})
		run(t, a, b, func() bool { return len(b.segs) == 3 })
		require.NoError(t, b.err)
		require.Equal(t, OpImmediate, b.segs[0].Opcode())
		require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, b.segs[0].Payload)
		require.Equal(t, OpImmediateSE, b.segs[2].Opcode())
		// Immediate Data shares QN 0's MSN sequence with Sends (RFC 7306 §6.3).
		require.Equal(t, []uint32{1, 2, 3}, []uint32{b.segs[0].MSN, b.segs[1].MSN, b.segs[2].MSN})
	})
}

func TestLoopbackTerminate(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		a.qp.PostTerminate(&Error{Layer: LayerRDMAP, Type: RDMAPErrTypeOperation, Code: RDMAPErrOpcode})
		run(t, a, b, func() bool { return len(b.segs) == 1 })
		s := b.segs[0]
		require.Equal(t, OpTerminate, s.Opcode())
		require.Equal(t, uint32(QNTerminate), s.QN)
		term, err := ParseTerminate(s.Payload)
		require.NoError(t, err)
		require.Equal(t, TerminateCtrl{Layer: LayerRDMAP, EType: RDMAPErrTypeOperation, Code: RDMAPErrOpcode}, term.TerminateCtrl)
	})
}

// hostileCase sets up memory on both peers, has a send something, and names
// the fault b must find.
type hostileCase struct {
	name string
	// do registers memory on a and b, posts on a, and returns the bytes of
	// b that must stay as they are.
	do   func(t *testing.T, a, b *QP) []byte
	want Error // Layer, Type, Code
	rdma bool  // the Terminate carries the Read Request header
}

func hostileCases() []hostileCase {
	reg := func(t *testing.T, q *QP, buf []byte, acc Access) STag {
		s, err := q.Register(buf, acc)
		require.NoError(t, err)
		return s
	}
	readOf := func(sink, src STag, to uint64, n uint32) ReadRequest {
		return ReadRequest{SinkSTag: uint32(sink), Size: n, SrcSTag: uint32(src), SrcTO: to}
	}
	return []hostileCase{
		{name: "write out of bounds", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrBaseBounds},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				a.PostWrite(s, 4000, pattern(97, 1))
				return buf
			}},
		{name: "write one octet past the end", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrBaseBounds},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				a.PostWrite(s, 4096, []byte{1})
				return buf
			}},
		{name: "write with TO wrap", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrTOWrap},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				a.PostWrite(s, ^uint64(0)-3, pattern(16, 1))
				return buf
			}},
		{name: "write with stale STag", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrInvalidSTag},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				require.True(t, b.Invalidate(s))
				a.PostWrite(s, 0, pattern(16, 1))
				return buf
			}},
		{name: "write with wrong key", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrInvalidSTag},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				a.PostWrite(s^0x5a, 0, pattern(16, 1))
				return buf
			}},
		{name: "write with unknown index", want: Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: DDPErrInvalidSTag},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteWrite)
				a.PostWrite(s+0x100, 0, pattern(16, 1))
				return buf
			}},
		{name: "write without the right", want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrAccessRights},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 4096)
				s := reg(t, b, buf, AccessRemoteRead|AccessLocalWrite)
				a.PostWrite(s, 0, pattern(16, 1))
				return buf
			}},
		{name: "read out of bounds", rdma: true, want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrBaseBounds},
			do: func(t *testing.T, a, b *QP) []byte {
				sink := reg(t, a, make([]byte, 8192), AccessLocalWrite)
				src := reg(t, b, make([]byte, 4096), AccessRemoteRead)
				_, err := a.PostReadRequest(readOf(sink, src, 1, 4096))
				require.NoError(t, err)
				return nil
			}},
		{name: "read without the right", rdma: true, want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrAccessRights},
			do: func(t *testing.T, a, b *QP) []byte {
				sink := reg(t, a, make([]byte, 8192), AccessLocalWrite)
				src := reg(t, b, make([]byte, 4096), AccessRemoteWrite)
				_, err := a.PostReadRequest(readOf(sink, src, 0, 16))
				require.NoError(t, err)
				return nil
			}},
		{name: "read with stale STag", rdma: true, want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrInvalidSTag},
			do: func(t *testing.T, a, b *QP) []byte {
				sink := reg(t, a, make([]byte, 8192), AccessLocalWrite)
				src := reg(t, b, make([]byte, 4096), AccessRemoteRead)
				b.Invalidate(src)
				_, err := a.PostReadRequest(readOf(sink, src, 0, 16))
				require.NoError(t, err)
				return nil
			}},
		{name: "read with TO wrap", rdma: true, want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrTOWrap},
			do: func(t *testing.T, a, b *QP) []byte {
				sink := reg(t, a, make([]byte, 8192), AccessLocalWrite)
				src := reg(t, b, make([]byte, 4096), AccessRemoteRead)
				_, err := a.PostReadRequest(readOf(sink, src, ^uint64(0), 16))
				require.NoError(t, err)
				return nil
			}},
		{name: "reads beyond the IRD", rdma: true, want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeOperation, Code: RDMAPErrCatastrophicStream},
			do: func(t *testing.T, a, b *QP) []byte {
				b.SetReadLimits(2, 8)
				sink := reg(t, a, make([]byte, 8192), AccessLocalWrite)
				src := reg(t, b, make([]byte, 4096), AccessRemoteRead)
				for i := 0; i < 3; i++ {
					_, err := a.PostReadRequest(readOf(sink, src, 0, 16))
					require.NoError(t, err)
				}
				return nil
			}},
		{name: "invalidate a stale STag", want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeOperation, Code: RDMAPErrCannotInvalidate},
			do: func(t *testing.T, a, b *QP) []byte {
				s := reg(t, b, make([]byte, 16), AccessRemoteWrite|AccessRemoteInvalidate)
				b.Invalidate(s)
				a.PostSendInvalidate(false, s, []byte("x"))
				return nil
			}},
		{name: "invalidate without the right", want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeProtection, Code: RDMAPErrCannotInvalidate},
			do: func(t *testing.T, a, b *QP) []byte {
				s := reg(t, b, make([]byte, 16), AccessRemoteWrite)
				a.PostSendInvalidate(true, s, []byte("x"))
				return nil
			}},
		{name: "Read Response without a Read Request", want: Error{Layer: LayerRDMAP, Type: RDMAPErrTypeOperation, Code: RDMAPErrOpcode},
			do: func(t *testing.T, a, b *QP) []byte {
				buf := make([]byte, 64)
				s := reg(t, b, buf, AccessLocalWrite|AccessRemoteWrite)
				a.postTagged(OpReadResponse, s, 0, [][]byte{pattern(8, 1)})
				return buf
			}},
	}
}

func TestLoopbackHostile(t *testing.T) {
	for _, hc := range hostileCases() {
		t.Run(hc.name, func(t *testing.T) {
			a, b := qpPair(t, pairOpts{true, true})
			guard := hc.do(t, a.qp, b.qp)
			before := append([]byte(nil), guard...)
			// Everything a posted reaches b's socket before b reads, so
			// that b handles it in one pass (the IRD case needs that).
			a.flushAll(t)
			waitArrived(t, b, a.qp.TxStats().Bytes)
			run(t, a, b, func() bool { return b.err != nil })
			var e *Error
			require.True(t, errors.As(b.err, &e))
			require.True(t, errors.Is(b.err, &hc.want), "got %v (%s), want %s", e, e.Name(), hc.want.Name())
			require.Equal(t, before, guard, "the faulting segment wrote into the region")
			// The fault is sticky: nothing after it is processed.
			_, err := b.qp.NextSegment()
			require.Equal(t, b.err, err)

			b.qp.PostTerminate(e)
			run(t, a, b, func() bool { return len(a.segs) > 0 || a.err != nil })
			require.NoError(t, a.err)
			require.Equal(t, OpTerminate, a.segs[0].Opcode())
			term, err := ParseTerminate(a.segs[0].Payload)
			require.NoError(t, err)
			require.Equal(t, hc.want.Layer, term.Layer)
			require.Equal(t, hc.want.Type, term.EType)
			require.Equal(t, hc.want.Code, term.Code)
			require.True(t, term.M && term.D, "the Terminate names the offending segment")
			require.Equal(t, hc.rdma, term.R)
			if hc.rdma {
				rr, err := ParseReadRequest(term.RDMAHeader)
				require.NoError(t, err)
				require.NotZero(t, rr.SinkSTag)
			}
		})
	}
}

// A Read Response that does not continue the outstanding Read Request is a
// tagged buffer fault at the requester, and nothing is placed.
func TestLoopbackReadResponseMismatch(t *testing.T) {
	for _, c := range []struct {
		name string
		post func(q *QP, sink STag)
		code uint8
	}{
		{"wrong STag", func(q *QP, sink STag) { q.postTagged(OpReadResponse, sink+0x100, 0, [][]byte{pattern(16, 1)}) }, DDPErrInvalidSTag},
		{"wrong TO", func(q *QP, sink STag) { q.postTagged(OpReadResponse, sink, 8, [][]byte{pattern(16, 1)}) }, DDPErrBaseBounds},
		{"too long", func(q *QP, sink STag) { q.postTagged(OpReadResponse, sink, 0, [][]byte{pattern(17, 1)}) }, DDPErrBaseBounds},
		{"too short", func(q *QP, sink STag) { q.postTagged(OpReadResponse, sink, 0, [][]byte{pattern(15, 1)}) }, DDPErrBaseBounds},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := qpPair(t, pairOpts{false, true})
			sink := make([]byte, 64)
			sinkTag, err := a.qp.Register(sink, AccessLocalWrite)
			require.NoError(t, err)
			_, err = a.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sinkTag), Size: 16, SrcSTag: 0x4242})
			require.NoError(t, err)
			// b answers by hand instead of from a region.
			b.qp.SetReadLimits(1, 1)
			c.post(b.qp, sinkTag)
			run(t, a, b, func() bool { return a.err != nil })
			require.ErrorIs(t, a.err, &Error{Layer: LayerDDP, Type: DDPErrTypeTagged, Code: c.code})
			require.Equal(t, make([]byte, 64), sink)
			require.Equal(t, 1, a.qp.OutstandingReads())
		})
	}
}

// AppendSend grows a queued Send in place: the peer sees one message with
// every appended byte, whatever marker positions the FPDU straddles, and
// appending stops as soon as the Send is on the wire or is not the last
// message queued.
func TestLoopbackAppendSend(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		r := rand.New(rand.NewSource(5))
		var want [][]byte
		for i := 0; i < 40; i++ {
			msg := pattern(1+r.Intn(300), byte(i))
			a.qp.PostSend(OpSend, msg)
			for j := r.Intn(5); j > 0; j-- {
				more := pattern(r.Intn(200), byte(j))
				if a.qp.AppendSend(func(p []byte) { p[0] = byte(len(p)) }, more) {
					msg = append(msg, more...)
					msg[0] = byte(len(msg))
				} else {
					require.Greater(t, len(msg)+len(more), a.qp.MULPDU()-DDPUntaggedHeaderLen)
				}
			}
			want = append(want, msg)
			if i%7 == 0 {
				a.flushAll(t)
				require.False(t, a.qp.AppendSend(nil, []byte("late")), "the Send is on the wire")
			}
		}
		a.qp.PostWrite(0, 0)
		require.False(t, a.qp.AppendSend(nil, []byte("x")), "the last message is not a Send")
		a.qp.PostSend(OpSend, pattern(5000, 1))
		require.False(t, a.qp.AppendSend(nil, []byte("x")), "a Send of several FPDUs does not grow")
		run(t, a, b, func() bool {
			return b.err != nil || (len(b.segs) > 0 && b.segs[len(b.segs)-1].MSN == uint32(len(want)+1) && b.segs[len(b.segs)-1].Last)
		})
		require.NoError(t, b.err)
		i := 0
		for k, w := range want {
			var m []byte
			require.Equal(t, uint32(k+1), b.segs[i].MSN)
			m, i = message(t, b.segs, i)
			require.Equal(t, w, m, "message %d", k)
		}
		require.Equal(t, uint64(len(b.segs)), b.qp.RxStats().FPDUs-1, "one FPDU per segment, plus the zero-length Write")
		require.Equal(t, a.qp.TxStats(), TxStats{FPDUs: b.qp.RxStats().FPDUs, Markers: b.qp.RxStats().Markers, Bytes: b.qp.RxStats().Bytes})
	})
}
