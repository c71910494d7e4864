package sdpcore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/iwarp"
)

// qp returns the iwarp QP under c, for tests that drive it directly.
func (c *Conn) qp() *iwarp.QP { return c.tr.(*qpTransport).qp() }

// overQP is q as a Conn's Transport, for tests that build a Conn by hand.
func overQP(q *iwarp.QP) Transport { return (*qpTransport)(q) }

// TestQPTransportSegments checks how qpTransport names iwarp's segments for
// onSegment, and that the faults it makes of the ones SDP rejects carry the
// classification a Terminate reports.
func TestQPTransportSegments(t *testing.T) {
	for _, tc := range []struct {
		op   iwarp.Opcode
		want SegmentKind
	}{
		{iwarp.OpSend, SegSend}, {iwarp.OpSendSE, SegSend},
		{iwarp.OpImmediate, SegImmediate}, {iwarp.OpImmediateSE, SegImmediate},
		{iwarp.OpSendInvalidate, SegOther}, {iwarp.OpSendSEInvalidate, SegOther},
		{iwarp.OpTerminate, SegTerminate}, {iwarp.OpReadRequest, SegOther},
		{iwarp.OpRDMAWrite, SegTagged}, {iwarp.OpReadResponse, SegTagged},
	} {
		info, _ := tc.op.Info()
		s := iwarp.DDPSegment{Tagged: info.Tagged, RDMAPCtrl: iwarp.RDMAPCtrl(tc.op), QN: info.QN}
		require.Equal(t, tc.want, segmentKind(&s), tc.op.String())
	}
	tr := overQP(iwarp.NewQP(-1))
	err := tr.RejectSegment(Segment{Kind: SegOther, Op: uint8(iwarp.OpSendInvalidate)})
	require.True(t, errors.Is(err, &iwarp.Error{Layer: iwarp.LayerRDMAP, Type: iwarp.RDMAPErrTypeOperation, Code: iwarp.RDMAPErrOpcode}))
	require.Contains(t, err.Error(), "unexpected opcode SendInvalidate")
	err = tr.RejectSegment(Segment{Kind: SegTagged, Op: uint8(iwarp.OpRDMAWrite)})
	require.True(t, errors.Is(err, &iwarp.Error{Layer: iwarp.LayerDDP, Type: iwarp.DDPErrTypeTagged, Code: iwarp.DDPErrInvalidSTag}))
	require.False(t, tr.Terminate(err), "no Terminate before Full Operation")
}

// TestQPTransportAccess checks that each right reaches iwarp as itself.
func TestQPTransportAccess(t *testing.T) {
	q := iwarp.NewQP(-1)
	for a, want := range map[Access]iwarp.Access{
		AccessLocalWrite:                     iwarp.AccessLocalWrite,
		AccessRemoteWrite:                    iwarp.AccessRemoteWrite,
		AccessRemoteRead:                     iwarp.AccessRemoteRead,
		AccessRemoteWrite | AccessLocalWrite: iwarp.AccessRemoteWrite | iwarp.AccessLocalWrite,
	} {
		s, err := overQP(q).Register(make([]byte, 8), a)
		require.NoError(t, err)
		_, got, ok := q.Mem().Region(iwarp.STag(s))
		require.True(t, ok)
		require.Equal(t, want, got, a)
	}
}
