package iwarp

// Untagged message reassembly (RFC 5041 §5.2, §5.3). NextSegment already
// checks each untagged segment against its queue: QN 0, 1 or 2, the MSN the
// queue expects, an MO that continues the message exactly, and a Last flag
// that closes it (the next segment must then start MSN+1 at MO 0).
// NextMessage builds whole messages from those segments, one reassembly
// buffer per queue, so that a Terminate on QN 2 can arrive between two
// segments of a Send on QN 0. A message that fits one segment is returned
// without a copy.

// DefaultMaxRecvMessage bounds a reassembled message unless
// SetMaxRecvMessage says otherwise.
const DefaultMaxRecvMessage = 64 << 20

// Message is one whole untagged RDMAP message: a Send of any kind,
// Immediate Data, or a Terminate. Read Requests are answered by the QP and
// never returned.
type Message struct {
	Opcode         Opcode
	QN, MSN        uint32
	InvalidateSTag uint32 // Send with Invalidate: the STag invalidated here
	Segments       int    // DDP segments it arrived in
	// Payload is valid until Release.
	Payload []byte
	seg     Segment // the one segment, when Payload aliases its chunk
}

// Release gives back the receive chunk a one-segment message aliases.
// Call it exactly once.
func (m *Message) Release() { m.seg.Release() }

// reasm is one queue's message in progress.
type reasm struct {
	buf  []byte
	segs int
}

// SetMaxRecvMessage bounds the length of a message NextMessage reassembles;
// a longer one is DDP error "message too long for available buffer".
func (q *QP) SetMaxRecvMessage(n int) { q.maxRecvMsg = max(n, 0) }

// NextMessage returns the next whole untagged message, ErrNeedMore while
// its last segment has not arrived, or the protocol fault (see NextSegment,
// which it uses: a caller uses one or the other, not both).
func (q *QP) NextMessage() (Message, error) {
	limit := q.maxRecvMsg
	if limit == 0 {
		limit = DefaultMaxRecvMessage
	}
	for {
		seg, err := q.NextSegment()
		if err != nil {
			return Message{}, err
		}
		r := &q.reasm[seg.QN]
		m := Message{Opcode: seg.Opcode(), QN: seg.QN, MSN: seg.MSN, InvalidateSTag: seg.InvalidateSTag}
		if seg.Last && r.segs == 0 {
			m.Segments, m.Payload, m.seg = 1, seg.Payload, seg
			return m, nil
		}
		if len(r.buf)+len(seg.Payload) > limit {
			var h [DDPUntaggedHeaderLen]byte
			EncodeUntaggedHeader(h[:], seg.Last, seg.RDMAPCtrl, seg.InvalidateSTag, seg.QN, seg.MSN, seg.MO)
			err := q.setFault(ddpErr(DDPErrTypeUntagged, DDPErrTooLong, "message on QN %d (MSN %d) grows past %d octets",
				seg.QN, seg.MSN, limit), h[:])
			q.faultSegLen = DDPUntaggedHeaderLen + len(seg.Payload)
			seg.Release()
			return Message{}, err
		}
		r.buf = append(r.buf, seg.Payload...)
		r.segs++
		seg.Release()
		if seg.Last {
			m.Segments, m.Payload = r.segs, r.buf
			*r = reasm{}
			return m, nil
		}
	}
}
