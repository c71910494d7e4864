package iwarp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMPANegotiationExchange(t *testing.T) {
	for _, c := range []struct{ im, ic, rm, rc bool }{
		{true, true, true, true}, {true, false, false, false}, {false, true, true, false}, {false, false, false, false},
	} {
		ini, err := NewMPAInitiator(MPAConfig{Markers: c.im, CRC: c.ic, PrivateData: []byte("hello")})
		require.NoError(t, err)
		res, err := NewMPAResponder(MPAConfig{Markers: c.rm, CRC: c.rc, PrivateData: []byte("ack")})
		require.NoError(t, err)
		require.Empty(t, res.Out(), "the responder speaks only after the Request")
		req := ini.Out()
		n, err := res.Feed(append(req, 0, 0, 0, 0)) // an FPDU may follow at once
		require.NoError(t, err)
		require.Equal(t, len(req), n)
		rep := res.Out()
		n, err = ini.Feed(rep)
		require.NoError(t, err)
		require.Equal(t, len(rep), n)
		ir, ok := ini.Result()
		require.True(t, ok)
		rr, ok := res.Result()
		require.True(t, ok)
		require.Equal(t, c.ic || c.rc, ir.CRC)
		require.Equal(t, ir.CRC, rr.CRC)
		require.Equal(t, c.rm, ir.TxMarkers, "M in the Reply: the responder wants markers")
		require.Equal(t, c.im, ir.RxMarkers)
		require.Equal(t, ir.TxMarkers, rr.RxMarkers)
		require.Equal(t, ir.RxMarkers, rr.TxMarkers)
		require.Equal(t, "hello", string(rr.Peer.PrivateData))
		require.Equal(t, "ack", string(ir.Peer.PrivateData))
	}
}

func TestMPANegotiationReject(t *testing.T) {
	ini, err := NewMPAInitiator(MPAConfig{CRC: true})
	require.NoError(t, err)
	_, err = ini.Feed(AppendMPAFrame(nil, &MPAFrame{Reply: true, Reject: true, Rev: 1}))
	require.ErrorIs(t, err, &Error{Layer: LayerMPA, Type: MPAErrType, Code: MPAErrReqRep})
	_, err2 := ini.Feed(nil)
	require.Equal(t, err, err2, "a failed exchange stays failed")
	_, err = NewMPAResponder(MPAConfig{PrivateData: make([]byte, MPAMaxPrivateData+1)})
	require.Error(t, err)
}

// FuzzMPANegotiation feeds arbitrary bytes to either end of the exchange,
// cut into pieces at arbitrary points, and checks that the outcome does not
// depend on the cuts, that a success consumed exactly one valid frame whose
// flags the result reflects, and that a responder answers exactly then.
func FuzzMPANegotiation(f *testing.F) {
	f.Add(AppendMPAFrame(nil, &MPAFrame{Markers: true, CRC: true, Rev: 1, PrivateData: []byte("pd")}), false, uint8(3), uint8(0))
	f.Add(AppendMPAFrame(nil, &MPAFrame{Reply: true, CRC: true, Rev: 2}), true, uint8(0), uint8(7))
	f.Add(AppendMPAFrame(nil, &MPAFrame{Reply: true, Reject: true, Rev: 1}), true, uint8(1), uint8(1))
	f.Add([]byte("SSH-2.0-OpenSSH_9.2\r\n"), true, uint8(2), uint8(5))
	f.Add([]byte("MPA ID Req Frame\x80\x01\x01\xff"), false, uint8(3), uint8(20))
	// RFC 6581: IRD/ORD blocks, RTR offers and selections, and broken ones.
	v2 := func(reply bool, p MPAv2Params, pd string) []byte {
		return AppendMPAFrame(nil, &MPAFrame{Reply: reply, Enhanced: true, Rev: 2, PrivateData: append(AppendMPAv2Params(nil, p), pd...)})
	}
	f.Add(v2(false, MPAv2Params{IRD: 4, ORD: 8}, "pd"), false, uint8(4), uint8(3))
	f.Add(v2(false, MPAv2Params{PeerToPeer: true, WriteRTR: true, ReadRTR: true, IRD: 16, ORD: 16}, ""), false, uint8(0xf4), uint8(9))
	f.Add(v2(true, MPAv2Params{PeerToPeer: true, WriteRTR: true, IRD: 2, ORD: 2}, "ok"), true, uint8(0xf4), uint8(1))
	f.Add(v2(true, MPAv2Params{IRD: 1, ORD: 40}, ""), true, uint8(4), uint8(2))
	f.Add(v2(true, MPAv2Params{IRD: MPAv2NoIRDORD, ORD: MPAv2NoIRDORD}, ""), true, uint8(4), uint8(2))
	f.Add(AppendMPAFrame(nil, &MPAFrame{Enhanced: true, Rev: 1, PrivateData: []byte{0, 1, 0, 1}}), false, uint8(4), uint8(0))
	f.Add(AppendMPAFrame(nil, &MPAFrame{Enhanced: true, Rev: 2, PrivateData: []byte{0, 1}}), false, uint8(4), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, initiator bool, cfgBits, step uint8) {
		cfg := MPAConfig{Markers: cfgBits&1 != 0, CRC: cfgBits&2 != 0, Rev: 1 + cfgBits>>2&1,
			IRD: int(step % 5), ORD: int(step / 5 % 5)}
		if cfg.Rev == 2 && cfgBits&0x80 != 0 {
			cfg.PeerToPeer, cfg.RTR = true, RTRType(cfgBits>>4&7)
		}
		start := func() *MPANegotiation {
			var n *MPANegotiation
			var err error
			if initiator {
				n, err = NewMPAInitiator(cfg)
			} else {
				n, err = NewMPAResponder(cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			n.Out()
			return n
		}
		// Whole input at once.
		whole := start()
		nWhole, errWhole := whole.Feed(data)
		// The same input arriving in pieces of 1+step%32 octets.
		cut := start()
		chunk := 1 + int(step%32)
		var nCut int
		var errCut error = ErrNeedMore
		for end := 0; errCut == ErrNeedMore && end < len(data); {
			end = min(end+chunk, len(data))
			nCut, errCut = cut.Feed(data[:end])
		}
		if len(data) == 0 {
			nCut, errCut = cut.Feed(data)
		}
		if (errWhole == nil) != (errCut == nil) || nWhole != nCut {
			t.Fatalf("whole: %d %v; in pieces of %d: %d %v", nWhole, errWhole, chunk, nCut, errCut)
		}
		if errWhole != nil {
			var e *Error
			if errWhole != ErrNeedMore && !errors.As(errWhole, &e) {
				t.Fatalf("error of type %T: %v", errWhole, errWhole)
			}
			if whole.Done() {
				t.Fatalf("failed exchange is done")
			}
			// Only a responder refusing a well-formed Request answers, and
			// then with a Reply that rejects.
			if out := whole.Out(); len(out) != 0 {
				rep, m, err := ParseMPAFrame(out, true)
				if initiator || err != nil || m != len(out) || !rep.Reject {
					t.Fatalf("failed exchange answers %q (%v)", out, err)
				}
			}
			return
		}
		fr, n, err := ParseMPAFrame(data, initiator)
		if err != nil || n != nWhole || fr.Reject {
			t.Fatalf("accepted %d octets that parse as %v %d %v", nWhole, fr, n, err)
		}
		r, ok := whole.Result()
		// The IRD/ORD block of an S frame is never the ULP's, whatever
		// revision the exchange settles on.
		ulpPD := fr.PrivateData
		if fr.Enhanced {
			ulpPD = ulpPD[MPAv2ParamsLen:]
		}
		if !ok || r.CRC != (fr.CRC || cfg.CRC) || r.TxMarkers != fr.Markers || r.RxMarkers != cfg.Markers ||
			!bytes.Equal(r.Peer.PrivateData, ulpPD) || r.Enhanced != (fr.Enhanced && cfg.Rev == 2) {
			t.Fatalf("result %+v from frame %v and config %+v", r, fr, cfg)
		}
		// Never more Reads than the peer can answer; RTR only when asked.
		if r.Enhanced && r.PeerParams.IRD != MPAv2NoIRDORD && r.ORD > int(r.PeerParams.IRD) {
			t.Fatalf("ORD %d above the peer's IRD %d", r.ORD, r.PeerParams.IRD)
		}
		if r.RTR != 0 && (!cfg.PeerToPeer || r.RTR&cfg.RTR != r.RTR || r.RTR&(r.RTR-1) != 0) {
			t.Fatalf("RTR %v settled with config %+v", r.RTR, cfg)
		}
		out := whole.Out()
		if initiator {
			if len(out) != 0 {
				t.Fatalf("the initiator answers a Reply")
			}
			return
		}
		rep, m, err := ParseMPAFrame(out, true)
		if err != nil || m != len(out) || rep.Markers != cfg.Markers || rep.CRC != cfg.CRC || rep.Rev > fr.Rev {
			t.Fatalf("reply %v (%v) to %v", rep, err, fr)
		}
	})
}

func TestCapabilities(t *testing.T) {
	q := NewQP(-1)
	c := q.Capabilities()
	require.True(t, c.FlowControlByTransport)
	require.True(t, c.MarkersInSoftware)
	require.True(t, c.AppendToQueued)
	require.Equal(t, DefaultIRD, c.MaxIRD)
	require.Equal(t, 0, c.MULPDU, "no MULPDU before Full Operation")
	q.SetReadLimits(0, 3)
	q.StartFullOperation(true, true, true, 0, 1448)
	c = q.Capabilities()
	require.Equal(t, 1, c.MaxIRD)
	require.Equal(t, 3, c.MaxORD)
	require.Equal(t, 1430, c.MULPDU, "RFC 5044 §4.5 with markers at EMSS 1448")
	require.True(t, c.DirectPlacement)
	require.Equal(t, uint8(2), c.MaxMPARevision)
	require.Equal(t, RTRSend|RTRWrite|RTRRead, c.RTR)
	q.SetDirectPlacement(false)
	require.False(t, q.Capabilities().DirectPlacement)
}

// exchange runs a whole negotiation between two configurations in memory.
func exchange(t *testing.T, ic, rc MPAConfig) (ir, rr MPAResult, ierr, rerr error) {
	t.Helper()
	ini, err := NewMPAInitiator(ic)
	require.NoError(t, err)
	res, err := NewMPAResponder(rc)
	require.NoError(t, err)
	req := ini.Out()
	n, rerr := res.Feed(req)
	if rerr == nil {
		require.Equal(t, len(req), n)
	}
	rep := res.Out()
	if len(rep) > 0 {
		_, ierr = ini.Feed(rep)
	}
	ir, _ = ini.Result()
	rr, _ = res.Result()
	return ir, rr, ierr, rerr
}

func TestMPARev2IRDORD(t *testing.T) {
	ir, rr, ierr, rerr := exchange(t,
		MPAConfig{Rev: 2, CRC: true, IRD: 4, ORD: 8, PrivateData: []byte("hello")},
		MPAConfig{Rev: 2, IRD: 2, ORD: 16, PrivateData: []byte("ack")})
	require.NoError(t, ierr)
	require.NoError(t, rerr)
	require.True(t, ir.Enhanced && rr.Enhanced)
	require.Equal(t, uint8(2), ir.Rev)
	require.True(t, ir.Peer.Enhanced)
	require.Equal(t, "hello", string(rr.Peer.PrivateData), "the IRD/ORD block is not the ULP's private data")
	require.Equal(t, "ack", string(ir.Peer.PrivateData))
	require.Equal(t, MPAv2Params{IRD: 4, ORD: 8}, rr.PeerParams)
	// The responder issues no more Reads than the initiator answers, and
	// the initiator no more than the responder answers.
	require.Equal(t, 2, rr.IRD)
	require.Equal(t, 4, rr.ORD)
	require.Equal(t, MPAv2Params{IRD: 2, ORD: 4}, ir.PeerParams)
	require.Equal(t, 4, ir.IRD)
	require.Equal(t, 2, ir.ORD)
	require.Zero(t, ir.RTR)

	// 0x3FFF: no automatic negotiation; the defaults stay.
	ir, rr, ierr, rerr = exchange(t, MPAConfig{Rev: 2, IRD: MPAv2NoIRDORD, ORD: MPAv2NoIRDORD}, MPAConfig{Rev: 2, ORD: 40})
	require.NoError(t, ierr)
	require.NoError(t, rerr)
	require.Equal(t, DefaultIRD, ir.IRD)
	require.Equal(t, DefaultORD, ir.ORD)
	require.Equal(t, 40, rr.ORD)
}

func TestMPARevisionMix(t *testing.T) {
	for _, c := range []struct{ irev, rrev, want uint8 }{{2, 1, 1}, {1, 2, 1}, {1, 1, 1}, {2, 2, 2}, {0, 2, 1}} {
		ir, rr, ierr, rerr := exchange(t, MPAConfig{Rev: c.irev}, MPAConfig{Rev: c.rrev})
		require.NoError(t, ierr)
		require.NoError(t, rerr)
		require.Equal(t, c.want, ir.Rev, "%+v", c)
		require.Equal(t, c.want, rr.Rev, "%+v", c)
		require.Equal(t, c.want == 2, ir.Enhanced)
		require.Equal(t, c.want == 2, rr.Enhanced)
	}
}

func TestMPARTRSelection(t *testing.T) {
	ini := MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRSend | RTRWrite | RTRRead}
	for _, c := range []struct {
		accept, want RTRType
	}{{RTRSend | RTRWrite | RTRRead, RTRWrite}, {RTRRead | RTRSend, RTRRead}, {RTRSend, RTRSend}} {
		ir, rr, ierr, rerr := exchange(t, ini, MPAConfig{Rev: 2, PeerToPeer: true, RTR: c.accept})
		require.NoError(t, ierr)
		require.NoError(t, rerr)
		require.Equal(t, c.want, ir.RTR)
		require.Equal(t, c.want, rr.RTR)
	}
	// A responder without peer-to-peer mode declines: no RTR, and an
	// initiator that insists fails with "no matching RTR".
	ir, _, ierr, rerr := exchange(t, MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRWrite}, MPAConfig{Rev: 2})
	require.NoError(t, rerr)
	require.ErrorIs(t, ierr, &Error{Layer: LayerMPA, Code: MPAErrNoMatchingRTR})
	require.Zero(t, ir.RTR)
	// No RTR in common: the responder fails with error 7 and rejects.
	_, _, ierr, rerr = exchange(t, MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRSend}, MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRWrite})
	require.ErrorIs(t, rerr, &Error{Layer: LayerMPA, Code: MPAErrNoMatchingRTR})
	require.ErrorIs(t, ierr, &Error{Layer: LayerMPA, Code: MPAErrReqRep}, "the initiator sees the R flag")
	// A Rev 1 initiator cannot take part in RTR.
	_, _, _, rerr = exchange(t, MPAConfig{Rev: 1}, MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRWrite})
	require.ErrorIs(t, rerr, &Error{Layer: LayerMPA, Code: MPAErrNoMatchingRTR})
	_, err := NewMPAInitiator(MPAConfig{Rev: 1, PeerToPeer: true, RTR: RTRWrite})
	require.Error(t, err)
}

// Malformed RFC 6581 frames and Replies that do not fit the Request.
func TestMPARev2Rejects(t *testing.T) {
	v2 := func(reply bool, p MPAv2Params) []byte {
		return AppendMPAFrame(nil, &MPAFrame{Reply: reply, Enhanced: true, Rev: 2, PrivateData: AppendMPAv2Params(nil, p)})
	}
	for _, c := range []struct {
		name     string
		cfg      MPAConfig
		reply    bool
		frame    []byte
		code     uint8
		contains string
	}{
		{"S flag with revision 1", MPAConfig{Rev: 2}, false,
			AppendMPAFrame(nil, &MPAFrame{Enhanced: true, Rev: 1, PrivateData: []byte{0, 4, 0, 4}}), MPAErrReqRep, "revision 1"},
		{"S flag without the block", MPAConfig{Rev: 2}, false,
			AppendMPAFrame(nil, &MPAFrame{Enhanced: true, Rev: 2, PrivateData: []byte{0, 4}}), MPAErrReqRep, "IRD/ORD block"},
		{"Reply newer than Request", MPAConfig{Rev: 1}, true, v2(true, MPAv2Params{}), MPAErrReqRep, "newer"},
		{"Reply without S to a Rev 2 Request", MPAConfig{Rev: 2}, true,
			AppendMPAFrame(nil, &MPAFrame{Reply: true, Rev: 2}), MPAErrReqRep, "lacks the S flag"},
		{"Reply ORD above the IRD", MPAConfig{Rev: 2, IRD: 2}, true, v2(true, MPAv2Params{IRD: 4, ORD: 3}), MPAErrInsufficientIRD, "exceeds"},
		{"Reply selects an RTR not offered", MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRSend}, true,
			v2(true, MPAv2Params{PeerToPeer: true, WriteRTR: true}), MPAErrNoMatchingRTR, "exactly one"},
		{"Reply selects two RTRs", MPAConfig{Rev: 2, PeerToPeer: true, RTR: RTRSend | RTRWrite}, true,
			v2(true, MPAv2Params{PeerToPeer: true, WriteRTR: true, SendRTR: true}), MPAErrNoMatchingRTR, "exactly one"},
		{"Reply with RTR bits and no offer", MPAConfig{Rev: 2}, true,
			v2(true, MPAv2Params{ReadRTR: true}), MPAErrReqRep, "without a peer-to-peer offer"},
	} {
		var n *MPANegotiation
		var err error
		if c.reply {
			n, err = NewMPAInitiator(c.cfg)
		} else {
			n, err = NewMPAResponder(c.cfg)
		}
		require.NoError(t, err)
		_, err = n.Feed(c.frame)
		require.ErrorIs(t, err, &Error{Layer: LayerMPA, Code: c.code}, c.name)
		require.Contains(t, err.Error(), c.contains, c.name)
		require.False(t, n.Done(), c.name)
	}
	// Private data: with Rev 2 the block takes 4 of the 256 octets.
	_, err := NewMPAInitiator(MPAConfig{Rev: 2, PrivateData: make([]byte, MPAMaxPrivateData-MPAv2ParamsLen)})
	require.NoError(t, err)
	_, err = NewMPAInitiator(MPAConfig{Rev: 2, PrivateData: make([]byte, MPAMaxPrivateData-MPAv2ParamsLen+1)})
	require.ErrorIs(t, err, &Error{Layer: LayerMPA, Code: MPAErrReqRep})
	_, err = NewMPAInitiator(MPAConfig{Rev: 1, PrivateData: make([]byte, MPAMaxPrivateData)})
	require.NoError(t, err)
}
