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

// PeekStream is a stream that can show its next octets without taking
// them and say how many it holds (shm.Stream).
type PeekStream interface {
	Peek(b []byte) (int, error)
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
	keep0  int       // keep of the last sink set: a large Send's size without one
	ready  []Segment // segments read for the sink, NextSegment's first
	next   int
	trail  [8]byte // PAD and CRC field of a sunk FPDU
	peek   [ulpduLenLen + DDPUntaggedHeaderLen]byte
	placed uint64
}

// SinkSends sets (place non-nil) or clears the receive sink: the payload
// of large Sends on the Send queue, the first keep octets of each message
// excepted, goes where place says.
func (q *QP) SinkSends(place SinkPlace, keep int) {
	q.sink.place, q.sink.keep = place, keep
	if place != nil {
		q.sink.keep0 = keep
	}
}

// SinkPlaced is the number of payload octets read straight into sinks.
func (q *QP) SinkPlaced() uint64 { return q.sink.placed }

// Sunk reports whether the segment's payload lies in the receive sink.
func (s *Segment) Sunk() bool { return s.sunk }

// nextSunk returns the next segment a sink read, if any.
func (q *QP) nextSunk() (Segment, bool) {
	s := &q.sink
	if s.next == len(s.ready) {
		return Segment{}, false
	}
	seg := s.ready[s.next]
	s.ready[s.next] = Segment{}
	if s.next++; s.next == len(s.ready) {
		s.ready, s.next = s.ready[:0], 0
	}
	return seg, true
}

// sinkFill is fillStream's part over a stream that can peek, without
// markers and CRC: done when it has read (or failed) itself; otherwise
// lim bounds fillStream's read (0: no bound). A large Send is read apart
// from what comes before and after it, its headers first: with a sink set
// its payload goes there; without, the receive that comes next finds
// most of it still in the stream (Sinkable) and can give a sink.
func (q *QP) sinkFill(quiet bool) (n, lim int, err error, done bool) {
	s := &q.sink
	if q.peeker == nil || q.fault != nil || q.expectRTR != 0 || q.rx.markers || q.rx.crc || q.cur == nil {
		return 0, 0, nil, false
	}
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	pending := q.rxw - q.rxr
	if pending == 0 {
		// At an FPDU's start: a large Send's read takes its headers only,
		// and so does a read of a stream that holds less than headers
		// when looked at (it may hold more when read). A message's short
		// last FPDU is read alone: a large Send may follow it.
		k, _ := q.peeker.Peek(s.peek[:])
		switch {
		case k < hl && s.place != nil || k == hl && q.sinkPayload(s.peek[:]) > 0:
			return 0, hl, nil, false
		case DDPHeader(s.peek[ulpduLenLen:]).MO() != 0:
			if wire, err := q.rx.FrameLen(s.peek[:]); err == nil {
				return 0, wire, nil, false
			}
		}
		return 0, 0, nil, false
	}
	buf := q.cur.buf[q.rxr:q.rxw]
	if pending < hl {
		return 0, 0, nil, false
	}
	pay := q.sinkPayload(buf)
	if pay == 0 {
		return 0, 0, nil, false
	}
	wire, err := q.rx.FrameLen(buf)
	if err != nil || wire <= pending {
		return 0, 0, nil, false
	}
	// A message's later FPDUs are asked about here, its first once the
	// ULP's header is in (sinkRead).
	if pending == hl && s.place != nil && len(q.cur.buf)-q.rxw >= s.keep && q.peeker.Holds(wire-hl) {
		var dst []byte
		if mo := DDPHeader(buf[ulpduLenLen:]).MO(); mo != 0 || s.keep == 0 {
			var head []byte
			if mo == 0 {
				head = buf[:0]
			}
			if dst = s.place(head, pay); len(dst) != pay {
				return 0, wire - pending, nil, false
			}
		}
		n, err := q.sinkRead(buf, wire, pay, dst, quiet)
		return n, 0, err, true
	}
	return 0, wire - pending, nil, false // to the FPDU's end: the next one starts a read
}

// LargeNext reports whether the next FPDU to parse is a large Send's (one
// a sink would take) whose headers have arrived: over a stream a sink can
// read from, the FPDU that a receive with a sink would read straight into
// its buffer.
func (q *QP) LargeNext() bool {
	if !q.Sinkable() || q.fault != nil {
		return false
	}
	const hl = ulpduLenLen + DDPUntaggedHeaderLen
	if q.cur != nil && q.rxw > q.rxr {
		return q.rxw-q.rxr >= hl && q.sinkPayload(q.cur.buf[q.rxr:q.rxw]) > 0
	}
	k, _ := q.peeker.Peek(q.sink.peek[:])
	return k == hl && q.sinkPayload(q.sink.peek[:]) > 0
}

// Sinkable reports whether FPDUs arrive over a stream a sink can read
// from (SinkSends).
func (q *QP) Sinkable() bool {
	return q.peeker != nil && q.streaming() && !q.rx.markers && !q.rx.crc
}

// sinkPayload is the part of the FPDU whose headers h holds that a sink
// would take: the payload of a Send on the Send queue, less the ULP's
// header at MO 0, if at least sinkMin; else 0.
func (q *QP) sinkPayload(h []byte) int {
	ulen := int(binary.BigEndian.Uint16(h))
	ddp := DDPHeader(h[ulpduLenLen:])
	if ulen > q.rx.maxULPDU || ddp.Tagged() || ddp.QN() != QNSend || (ddp.Opcode() != OpSend && ddp.Opcode() != OpSendSE) {
		return 0
	}
	pay := ulen - DDPUntaggedHeaderLen
	if ddp.MO() == 0 {
		pay -= q.sink.keep0
	}
	if pay < sinkMin {
		return 0
	}
	return pay
}

// sinkRead reads the rest of the FPDU whose headers the chunk holds (hdr,
// wire octets in all, pay of them for the sink: dst, or where the sink
// places them once the ULP's header is in), which the stream holds whole.
func (q *QP) sinkRead(hdr []byte, wire, pay int, dst []byte, quiet bool) (int, error) {
	s := &q.sink
	seg, err := ParseDDPSegment(hdr[ulpduLenLen:])
	if err != nil {
		return 0, q.setFault(err, hdr[ulpduLenLen:])
	}
	keep := 0
	if seg.MO == 0 {
		keep = s.keep
	}
	head := q.cur.buf[q.rxw : q.rxw+keep]
	if dst == nil {
		k, err := q.readStream(head, quiet)
		q.rxw += k
		if k < keep {
			return k, err // the stream changed under Holds: the chunk takes the rest
		}
		if dst = s.place(head, pay); len(dst) != pay {
			return k, nil
		}
	}
	trail := s.trail[:wire-len(hdr)-keep-pay]
	if k, _ := q.readStream(dst, quiet); k < pay {
		return keep + k, q.setFault(ddpErr(DDPErrTypeCatastrophic, DDPErrCatastrophic,
			"stream held %d octets of an FPDU it said it held whole", len(hdr)+keep+k), hdr[ulpduLenLen:])
	}
	if k, _ := q.readStream(trail, quiet); k < len(trail) {
		return keep + pay + k, q.setFault(ddpErr(DDPErrTypeCatastrophic, DDPErrCatastrophic,
			"stream held %d octets of an FPDU it said it held whole", len(hdr)+keep+pay+k), hdr[ulpduLenLen:])
	}
	d := q.rx
	d.pos += uint64(wire)
	d.stats.FPDUs++
	d.stats.Bytes += uint64(wire)
	q.rxr = q.rxw
	if err := q.checkUntaggedLen(&seg, keep+pay); err != nil {
		return wire - len(hdr), q.setFault(err, hdr[ulpduLenLen:])
	}
	if keep > 0 {
		first := seg
		first.Last = false
		first.Payload = head[:keep:keep]
		q.cur.refs++
		s.ready = append(s.ready, Segment{DDPSegment: first, chunk: q.cur})
	}
	seg.MO += uint32(keep)
	seg.Payload = dst
	s.ready = append(s.ready, Segment{DDPSegment: seg, sunk: true})
	s.placed += uint64(pay)
	q.drained = false
	return wire - len(hdr), nil
}
