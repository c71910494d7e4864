package iwarp

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// rawUntagged frames one untagged segment with exactly the given header
// fields into q's transmit queue, bypassing q's own sequencing.
func rawUntagged(q *QP, last bool, op Opcode, qn, msn, mo uint32, payload []byte) {
	var h [DDPUntaggedHeaderLen]byte
	EncodeUntaggedHeader(h[:], last, RDMAPCtrl(op), 0, qn, msn, mo)
	q.txbuf = q.tx.AppendFPDU(q.txbuf, h[:], payload)
	q.txEnds = append(q.txEnds, len(q.txbuf))
}

// recvMessages flushes a and reads whole messages on b until it has n of
// them or a fault; payloads are copied.
func recvMessages(t *testing.T, a, b *peer, n int) ([]Message, error) {
	t.Helper()
	var got []Message
	deadline := time.Now().Add(testTimeout)
	for len(got) < n {
		require.True(t, time.Now().Before(deadline), "timed out with %d of %d messages", len(got), n)
		if a.qp.TxPending() > 0 {
			if err := a.qp.Flush(); err != nil && err != unix.EAGAIN {
				t.Fatal(err)
			}
		}
		m, err := b.qp.NextMessage()
		if err == ErrNeedMore {
			waitFd(t, b.qp.Fd(), unix.POLLIN, 100)
			if _, err := b.qp.Fill(); err != nil && err != unix.EAGAIN {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			return got, err
		}
		c := m
		c.Payload = append([]byte{}, m.Payload...)
		c.seg = Segment{}
		m.Release()
		got = append(got, c)
	}
	return got, nil
}

func TestNextMessageReassembles(t *testing.T) {
	forModes(t, func(t *testing.T, o pairOpts) {
		a, b := qpPair(t, o)
		big := pattern(100000, 8)
		a.qp.PostSend(OpSend, big)
		a.qp.PostSend(OpSendSE, []byte("small"))
		a.qp.PostSend(OpSend)
		a.qp.PostImmediate(true, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		ms, err := recvMessages(t, a, b, 4)
		require.NoError(t, err)
		require.True(t, bytes.Equal(big, ms[0].Payload))
		require.Greater(t, ms[0].Segments, 60, "100000 octets at MULPDU 1430")
		require.Equal(t, uint32(1), ms[0].MSN)
		require.Equal(t, Message{Opcode: OpSendSE, MSN: 2, Segments: 1, Payload: []byte("small")}, ms[1])
		require.Equal(t, Message{Opcode: OpSend, MSN: 3, Segments: 1, Payload: []byte{}}, ms[2])
		require.Equal(t, OpImmediateSE, ms[3].Opcode)
		require.Equal(t, uint32(4), ms[3].MSN)
	})
}

// A Terminate (QN 2) may arrive between two segments of a Send (QN 0):
// each queue reassembles on its own.
func TestNextMessageQueuesInterleave(t *testing.T) {
	a, b := qpPair(t, pairOpts{true, true})
	rawUntagged(a.qp, false, OpSend, QNSend, 1, 0, []byte("first half, "))
	a.qp.PostTerminate(&Error{Layer: LayerRDMAP, Type: RDMAPErrTypeCatastrophic, Code: RDMAPErrUnspecified})
	rawUntagged(a.qp, true, OpSend, QNSend, 1, 12, []byte("second half"))
	ms, err := recvMessages(t, a, b, 2)
	require.NoError(t, err)
	require.Equal(t, OpTerminate, ms[0].Opcode)
	require.Equal(t, uint32(QNTerminate), ms[0].QN)
	require.Equal(t, "first half, second half", string(ms[1].Payload))
	require.Equal(t, 2, ms[1].Segments)
}

// Every sequencing fault of an untagged queue ends the stream with the DDP
// untagged buffer error RFC 5041 §7.2 names, and nothing is delivered.
func TestNextMessageSequencingFaults(t *testing.T) {
	for _, c := range []struct {
		name string
		post func(q *QP)
		code uint8
	}{
		{"MSN skips", func(q *QP) { rawUntagged(q, true, OpSend, QNSend, 2, 0, []byte("x")) }, DDPErrMSNRange},
		{"MSN repeats", func(q *QP) {
			rawUntagged(q, true, OpSend, QNSend, 1, 0, []byte("x"))
			rawUntagged(q, true, OpSend, QNSend, 1, 0, []byte("y"))
		}, DDPErrMSNRange},
		{"next message before Last", func(q *QP) {
			rawUntagged(q, false, OpSend, QNSend, 1, 0, []byte("part"))
			rawUntagged(q, true, OpSend, QNSend, 2, 0, []byte("new"))
		}, DDPErrMSNRange},
		{"MO gap", func(q *QP) {
			rawUntagged(q, false, OpSend, QNSend, 1, 0, []byte("part"))
			rawUntagged(q, true, OpSend, QNSend, 1, 5, []byte("rest"))
		}, DDPErrInvalidMO},
		{"MO does not start at 0", func(q *QP) { rawUntagged(q, true, OpSend, QNSend, 1, 8, []byte("x")) }, DDPErrInvalidMO},
		{"QN unknown", func(q *QP) { rawUntagged(q, true, OpSend, 3, 1, 0, []byte("x")) }, DDPErrInvalidQN},
		{"Send on the Read Request queue", func(q *QP) { rawUntagged(q, true, OpSend, QNReadRequest, 1, 0, []byte("x")) }, DDPErrInvalidQN},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := qpPair(t, pairOpts{true, true})
			c.post(a.qp)
			ms, err := recvMessages(t, a, b, 2)
			require.ErrorIs(t, err, &Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: c.code})
			for _, m := range ms {
				require.NotEqual(t, "new", string(m.Payload))
				require.NotEqual(t, "rest", string(m.Payload))
			}
			e := b.qp.Fault().(*Error)
			b.qp.PostTerminate(e)
			run(t, a, b, func() bool { return len(a.segs) > 0 || a.err != nil })
			term, err := ParseTerminate(a.segs[0].Payload)
			require.NoError(t, err)
			require.Equal(t, LayerDDP, term.Layer)
			require.Equal(t, DDPErrTypeUntagged, term.EType)
			require.Equal(t, c.code, term.Code)
			require.True(t, term.M && term.D)
		})
	}
}

func TestNextMessageTooLong(t *testing.T) {
	a, b := qpPair(t, pairOpts{false, true})
	b.qp.SetMaxRecvMessage(3000)
	a.qp.PostSend(OpSend, pattern(3000, 1))
	a.qp.PostSend(OpSend, pattern(3001, 2))
	ms, err := recvMessages(t, a, b, 2)
	require.ErrorIs(t, err, &Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: DDPErrTooLong})
	require.Len(t, ms, 1)
	require.Len(t, ms[0].Payload, 3000)
	b.qp.PostTerminate(b.qp.Fault().(*Error))
	run(t, a, b, func() bool { return len(a.segs) > 0 || a.err != nil })
	term, err := ParseTerminate(a.segs[0].Payload)
	require.NoError(t, err)
	require.Equal(t, DDPErrTooLong, term.Code)
	require.Equal(t, uint32(2), DDPHeader(term.DDPHeader).MSN())
}
