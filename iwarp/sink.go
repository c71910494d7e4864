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
// Over a stream, only without markers and CRC (the same-host default):
// the stream is memory the kernel protects, and a CRC would have to be
// checked after the payload was placed.
//
// Over a socket, with markers (between hosts): FPDUs are read into the
// chunk as before, and checked whole there (markers and CRC) before
// anything is placed; then the payload of a large Send goes from the
// chunk into the sink over its markers (sinkChunk), one pass where
// closing the marker gaps in the chunk and the reader's copy out of it
// made two. Without markers the chunk's copy out is that one pass already.

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
	trail  [8]byte  // PAD and CRC field of a sunk FPDU
	head   [64]byte // a chunk's FPDU: its DDP header and keep octets, the markers left out
	large  bool     // the last FPDU parsed or begun was a large Send's
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
	if q.sink.next < len(q.sink.ready) {
		return 0, false // segments read for a sink come first
	}
	if q.cur == nil || q.rxr == q.rxw {
		return 0, false // the next Send's headers are not read yet
	}
	if q.chunkSinkable() && q.sink.place != nil && q.fault == nil {
		// Over a socket, only for a receive with a sink: it stops in
		// front of a Send its sink cannot take, for the next receive's. A
		// look reads on, as urgent data behind the Send must reach it.
		c, _ := q.chunkLarge()
		return c.pay, c.whole
	}
	if !q.streamSinkable() || q.fault != nil {
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

// Sinkable reports whether a sink (SinkSends) can take Send payload: over
// a stream it can read from, or from a socket's chunk where markers
// separate the payload's pieces.
func (q *QP) Sinkable() bool { return q.streamSinkable() || q.chunkSinkable() }

func (q *QP) streamSinkable() bool {
	return q.holder != nil && q.streaming() && !q.rx.markers && !q.rx.crc
}

func (q *QP) chunkSinkable() bool {
	return q.full && q.stream == nil && q.choice == nil && q.rx != nil && q.rx.markers
}

// ReadForSink readies a receive back from its wait to read the socket
// itself, into its sink, where the payload's pieces come from the chunk
// (chunkSinkable): the read that found the socket empty before the wait
// no longer holds. It reports whether that is the case; elsewhere the
// wait's look reads as before.
func (q *QP) ReadForSink() bool {
	if !q.chunkSinkable() || q.fault != nil || q.eof {
		return false
	}
	q.drained = false
	return true
}

// chunkSend is the large Send whose FPDU starts the chunk (chunkLarge).
type chunkSend struct {
	hdr, ulen, first, wire int // as RxDeframer.header says
	keep, pay              int // the ULP's header octets, and the payload a sink would take
	whole                  bool
}

// chunkLarge finds, where a sink over a socket can take it
// (chunkSinkable), the large Send that starts the chunk: an untagged Send
// on the Send queue with at least sinkMin octets of payload past the
// ULP's header. Its DDP header and the ULP's header, the markers left out,
// are in q.sink.head; nothing is checked yet, nothing changes.
func (q *QP) chunkLarge() (chunkSend, bool) {
	s, d := &q.sink, q.rx
	const dl = DDPUntaggedHeaderLen
	if q.expectRTR != 0 || s.keep > len(s.head)-dl || q.cur == nil {
		return chunkSend{}, false
	}
	buf := q.cur.buf[q.rxr:q.rxw]
	hdr, ulen, first, wire, err := d.header(buf)
	if err != nil || ulen < dl+s.keep+sinkMin || len(buf) < min(wire, hdr+ulpduLenLen+dl+s.keep+2*MarkerLen) {
		return chunkSend{}, false
	}
	// The chunk may hold only the FPDU's start: at least the headers and
	// room for a marker past them, so gather sees every marker among them.
	hb := s.head[:dl+s.keep]
	d.gather(hb, buf[:min(wire, len(buf))], hdr, first, ulen, 0)
	ddp := DDPHeader(hb)
	if ddp.Tagged() || ddp.QN() != QNSend || (ddp.Opcode() != OpSend && ddp.Opcode() != OpSendSE) {
		return chunkSend{}, false
	}
	keep := 0
	if ddp.MO() == 0 {
		keep = s.keep
	}
	pay := ulen - dl - keep
	if pay < sinkMin {
		return chunkSend{}, false
	}
	return chunkSend{hdr: hdr, ulen: ulen, first: first, wire: wire, keep: keep, pay: pay, whole: len(buf) >= wire}, true
}

// sinkChunk is NextSegmentTo's part for a sink over a socket
// (chunkSinkable): when the chunk holds a whole FPDU of a large Send on
// the Send queue whose payload the sink takes, it checks the FPDU, copies
// its payload into the sink over the markers, puts its segments (the
// ULP's header in the chunk, the payload in the sink) where nextSunkTo
// finds them and reports true. Anything else is left to NextSegmentTo,
// which finds any fault again and reports it.
func (q *QP) sinkChunk() (bool, error) {
	s, d := &q.sink, q.rx
	c, ok := q.chunkLarge()
	if !ok || !c.whole {
		return false, nil
	}
	const dl = DDPUntaggedHeaderLen
	keep, pay, hb := c.keep, c.pay, s.head[:dl+s.keep]
	var head []byte
	if keep > 0 {
		head = hb[dl : dl+keep : dl+keep]
	}
	dst := s.place(head, pay)
	if len(dst) != pay {
		return false, nil
	}
	fr := q.cur.buf[q.rxr : q.rxr+c.wire : q.rxr+c.wire]
	hdr, ulen, first := c.hdr, c.ulen, c.first
	markers, err := d.check(fr, hdr, ulen, first)
	if err != nil {
		return false, nil
	}
	d.gather(dst, fr, hdr, first, ulen, dl+keep)
	// The headers stay in the chunk, without their markers, for the
	// segments: the FPDU is checked and its payload placed, so its wire
	// form is no longer needed.
	lo := hdr + ulpduLenLen
	copy(fr[lo:], hb[:dl+keep])
	seg, err := ParseDDPSegment(fr[lo : lo+dl])
	if err != nil {
		return true, q.setFault(err, fr[lo:lo+dl])
	}
	d.advance(c.wire, markers)
	q.rxr += c.wire
	if err := q.checkUntaggedLen(&seg, keep+pay); err != nil {
		return true, q.setFault(err, fr[lo:lo+dl])
	}
	s.large = true
	if keep > 0 {
		first := seg
		first.Last = false
		first.Payload = fr[lo+dl : lo+dl+keep : lo+dl+keep]
		q.cur.refs++
		s.ready = append(s.ready, Segment{DDPSegment: first, chunk: q.cur})
	}
	seg.MO += uint32(keep)
	seg.Payload = dst
	s.ready = append(s.ready, Segment{DDPSegment: seg, sunk: true})
	s.placed += uint64(pay)
	return true, nil
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
