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
	f.Fuzz(func(t *testing.T, data []byte, initiator bool, cfgBits, step uint8) {
		cfg := MPAConfig{Markers: cfgBits&1 != 0, CRC: cfgBits&2 != 0, Rev: 1 + cfgBits>>2&1}
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
			if whole.Done() || len(whole.Out()) != 0 {
				t.Fatalf("failed exchange is done or answers")
			}
			return
		}
		fr, n, err := ParseMPAFrame(data, initiator)
		if err != nil || n != nWhole || fr.Reject {
			t.Fatalf("accepted %d octets that parse as %v %d %v", nWhole, fr, n, err)
		}
		r, ok := whole.Result()
		if !ok || r.CRC != (fr.CRC || cfg.CRC) || r.TxMarkers != fr.Markers || r.RxMarkers != cfg.Markers ||
			!bytes.Equal(r.Peer.PrivateData, fr.PrivateData) {
			t.Fatalf("result %+v from frame %v and config %+v", r, fr, cfg)
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
}
