package iwarp

import "encoding/binary"

// A receive sink: over a stream (shared memory), the payload of a large
// Send goes from the stream straight into the reader's buffer, instead of
// into the receive chunk and from there, in a second copy, into the
// reader's buffer.
//
// The ULP sets the sink for the length of one receive (SinkSends) and
// clears it before the call returns. While it is set, a fill reads an FPDU
// at a time: the headers first (and the first keep octets of a message,
// the ULP's own header), into the chunk, where they are checked as any
// FPDU's are; then, if the Send qualifies and the stream already holds all
// of it, its payload into the sink and the PAD and CRC field aside.
// Everything decided is decided on the chunk's private copy: what was
// peeked from shared memory only chooses how much to read. The segments
// come out of NextSegment as usual, the payload's with Sunk set; a ULP
// that keeps such a payload past the call copies it first.
//
// Only without markers and CRC (the same-host default): the stream is
// memory the kernel protects, and a CRC would have to be checked after
// the payload was placed.

// sinkMin is the least payload worth reading apart from its headers: below
// it the copy saved costs less than the extra reads of the stream.
const sinkMin = 4 << 10

// HoldStream is a stream that can say how many octets it holds
// (shm.Stream).
type HoldStream interface {
	Holds(n int) bool
}

// SinkPlace says where the n payload octets of the Send whose FPDU is
// being read go: memory of the ULP's, n octets long, or nil to leave them
// to the receive chunk. head is the message's first keep octets at MO 0,
// nil for a later FPDU of the same message. It must not change the ULP's
// state: the segments reach the ULP afterwards.
type SinkPlace func(head []byte, n int) []byte

// sink is the QP's receive sink and what it has read.
type sink struct {
	place  SinkPlace
	keep   int
	ready  []Segment // segments read for the sink, NextSegment's first
	next   int
	trail  [8]byte // PAD and CRC field of a sunk FPDU
	large  bool    // the last FPDU parsed or begun was a large Send's
	placed uint64
}

// SinkSends sets (place non-nil) or clears the receive sink: the payload
// of large Sends on the Send queue, the first keep octets of each message
// excepted, goes where place says.
func (q *QP) SinkSends(place SinkPlace, keep int) {
	q.sink.place = place
	if place != nil {
		q.sink.keep = keep // kept after: what a large Send is without a sink
	}
}

// SinkPlaced is the number of payload octets read straight into sinks.
func (q *QP) SinkPlaced() uint64 { return q.sink.placed }

// Sunk reports whether the segment's payload lies in the receive sink.
func (s *Segment) Sunk() bool { return s.sunk }

// nextSunkTo puts the next segment a sink read, if any, in *out.
func (q *QP) nextSunkTo(out *Segment) bool {
	s := &q.sink
	if s.next == len(s.ready) {
		return false
	}
	*out = s.ready[s.next]
	s.ready[s.next] = Segment{}
	if s.next++; s.next == len(s.ready) {
		s.ready, s.next = s.ready[:0], 0
	}
	return true
}

// sinkFill is fillStream's part over a stream that says what it holds,
// without markers and CRC: done when it has read (or failed) itself;
// otherwise lim bounds fillStream's read (0: no bound). After a large Send
// a read at an FPDU's start takes a small window (the next FPDU's headers
// and a little payload), and a read inside a large Send stops at its end:
// so a large Send's headers arrive in the chunk with most of its payload
// still in the stream, where a sink takes it (sinkRead) and, without one,
// the next receive's can (LargeNext). Small messages are read as before,
// as many as the chunk takes.
func (q *QP) sinkFill(quiet bool) (n, lim int, err error, done bool) {
	s := &q.sink
	if q.holder == nil || q.fault != nil || q.expectRTR != 0 || q.rx.markers || q.rx.crc || q.cur == nil {
		return 0, 0, nil, false
	}
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	pending := q.rxw - q.rxr
	if pending < hl+s.keep {
		if s.large {
			return 0, sinkWindow, nil, false
		}
		return 0, 0, nil, false
	}
	buf := q.cur.buf[q.rxr:q.rxw]
	pay, wire := q.sinkPayload(buf)
	if pay == 0 || wire <= pending {
		return 0, 0, nil, false
	}
	s.large = true
	keep := 0
	var head []byte // the ULP's header: only a message's first FPDU has one
	if DDPHeader(buf[ulpduLenLen:]).MO() == 0 {
		keep = s.keep
		head = buf[hl : hl+keep : hl+keep]
	}
	if have := pending - hl - keep; s.place != nil && have >= 0 && have < pay && q.holder.Holds(wire-pending) {
		if dst := s.place(head, pay); len(dst) == pay {
			n, err := q.sinkRead(buf, wire, keep, dst, quiet)
			return n, 0, err, true
		}
	}
	return 0, wire - pending, nil, false // to the FPDU's end: the next one starts a read
}

// sinkWindow is the read at an FPDU's start after a large Send: its
// headers and BSDH with room to spare, and the little payload that then
// takes the chunk on its way.
const sinkWindow = 256

// LargeNext reports whether the chunk holds the start of a large Send (one
// a sink would take) whose rest is still to be read: over a stream a sink
// can read from, what a receive with a sink would read straight into its
// buffer. pay is the payload the sink would take (0: there is no such
// Send); whole, that the stream already holds the rest of its FPDU, so
// that the receive would find it all.
func (q *QP) LargeNext() (pay int, whole bool) {
	if !q.Sinkable() || q.fault != nil || q.cur == nil {
		return 0, false
	}
	pending := q.rxw - q.rxr
	pay, wire := q.sinkPayload(q.cur.buf[q.rxr:q.rxw])
	if pay == 0 || wire <= pending {
		return 0, false
	}
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	return pay, pending >= hl+q.sink.keep && q.holder.Holds(wire-pending)
}

// Sinkable reports whether FPDUs arrive over a stream a sink can read
// from (SinkSends).
func (q *QP) Sinkable() bool {
	return q.holder != nil && q.streaming() && !q.rx.markers && !q.rx.crc
}

// sinkPayload is the part of the FPDU whose headers start h that a sink
// would take: the payload of a Send on the Send queue, less the ULP's
// header at MO 0, if at least sinkMin; else 0. wire is the FPDU's length.
func (q *QP) sinkPayload(h []byte) (pay, wire int) {
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	if len(h) < hl {
		return 0, 0
	}
	ulen := int(binary.BigEndian.Uint16(h))
	ddp := DDPHeader(h[ulpduLenLen:])
	if ulen > q.rx.maxULPDU || ddp.Tagged() || ddp.QN() != QNSend || (ddp.Opcode() != OpSend && ddp.Opcode() != OpSendSE) {
		return 0, 0
	}
	pay = ulen - DDPUntaggedHeaderLen
	if ddp.MO() == 0 {
		pay -= q.sink.keep
	}
	if pay < sinkMin {
		return 0, 0
	}
	_, _, wire = q.rx.layout(ulen)
	return pay, wire
}

// sinkRead reads the rest of the large Send whose start the chunk holds
// (buf: its headers, keep octets of the ULP's header and the first of its
// payload; wire octets in all) into dst, the payload's place, which the
// stream holds whole: the payload octets in the chunk are copied there
// first, the rest read there, the PAD and CRC field aside.
func (q *QP) sinkRead(buf []byte, wire, keep int, dst []byte, quiet bool) (int, error) {
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	s := &q.sink
	seg, err := ParseDDPSegment(buf[ulpduLenLen:hl])
	if err != nil {
		return 0, q.setFault(err, buf[ulpduLenLen:hl])
	}
	have := copy(dst, buf[hl+keep:])
	short := func(got int) error {
		return q.setFault(ddpErr(DDPErrTypeCatastrophic, DDPErrCatastrophic,
			"stream held %d octets of an FPDU of %d it said it held whole", len(buf)+got, wire), buf[ulpduLenLen:hl])
	}
	k, _ := q.readStream(dst[have:], quiet)
	if k < len(dst)-have {
		return k, short(k)
	}
	trail := s.trail[:wire-hl-keep-len(dst)]
	if t, _ := q.readStream(trail, quiet); t < len(trail) {
		return k + t, short(k + t)
	}
	d := q.rx
	d.pos += uint64(wire)
	d.stats.FPDUs++
	d.stats.Bytes += uint64(wire)
	head := buf[hl : hl+keep : hl+keep]
	q.rxr = q.rxw // the chunk's octets of this FPDU are taken
	if err := q.checkUntaggedLen(&seg, keep+len(dst)); err != nil {
		return k + len(trail), q.setFault(err, buf[ulpduLenLen:hl])
	}
	if keep > 0 {
		first := seg
		first.Last = false
		first.Payload = head
		q.cur.refs++
		s.ready = append(s.ready, Segment{DDPSegment: first, chunk: q.cur})
	}
	seg.MO += uint32(keep)
	seg.Payload = dst
	s.ready = append(s.ready, Segment{DDPSegment: seg, sunk: true})
	s.placed += uint64(len(dst) - have)
	q.drained = false
	return k + len(trail), nil
}
