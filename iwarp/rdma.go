package iwarp

import (
	"errors"
	"fmt"
	"unsafe"
)

// RDMA operations of a QP: tagged transfers into and out of registered
// memory, and the RDMAP messages that only make sense with them.
//
// Transmit. PostWrite and the Read Responses the QP sends copy the bytes
// into the transmit buffer when they are posted, like PostSend: the
// caller's buffers are free again as soon as the call returns, and a Read
// Response reads its source region when the Read Request arrives.
//
// Receive (NextSegment). A tagged segment is checked against the memory
// table (STag valid, right present, [TO, TO+len) inside the region) and
// then copied from the receive chunk into the region; a Read Response must
// also continue the oldest outstanding Read Request exactly. A Read Request
// is checked the same way against its source region and answered at once.
// Any failed check is a fault: nothing of that segment is written, and
// PostTerminate tells the peer which layer objected and why.
//
// Completions. A Read Request this side posted completes when its last
// Read Response segment is placed; with SetRemoteEvents the QP also reports
// what the peer did to local memory (RDMA Writes placed, STags invalidated,
// Read Requests answered). Completions queue until PollCompletions.

// Default limits on RDMA Reads in flight (RFC 5040 §6.1; RFC 6581 §9.1 calls
// them IRD and ORD). Both ends of an sdpcore connection use the defaults, so
// an ORD never exceeds the peer's IRD.
const (
	DefaultIRD = 16
	DefaultORD = 16
)

// ErrORDExceeded reports that PostReadRequest would exceed the ORD: wait
// for a CompReadDone first.
var ErrORDExceeded = errors.New("iwarp: outstanding RDMA Read Requests would exceed the ORD")

// CompletionKind says what a Completion reports.
type CompletionKind uint8

const (
	// CompReadDone: a Read Request posted here has all its data in the sink.
	CompReadDone CompletionKind = iota + 1
	// CompWritePlaced: the peer's RDMA Write message (all its segments) was
	// placed. Reported only with SetRemoteEvents.
	CompWritePlaced
	// CompReadAnswered: the peer's Read Request was answered; its Read
	// Response is queued. Reported only with SetRemoteEvents.
	CompReadAnswered
	// CompInvalidated: the peer's Send with Invalidate invalidated STag.
	// Reported only with SetRemoteEvents.
	CompInvalidated
)

func (k CompletionKind) String() string {
	switch k {
	case CompReadDone:
		return "ReadDone"
	case CompWritePlaced:
		return "WritePlaced"
	case CompReadAnswered:
		return "ReadAnswered"
	case CompInvalidated:
		return "Invalidated"
	}
	return fmt.Sprintf("CompletionKind(%d)", uint8(k))
}

// Completion is one finished operation.
type Completion struct {
	Kind CompletionKind
	ID   uint64 // CompReadDone: the id PostReadRequest returned
	STag STag   // the region written (ReadDone, WritePlaced), read or invalidated
	TO   uint64 // where the transfer started in that region
	Len  int    // octets moved
}

// pendingRead is a Read Request posted here and not yet fully answered.
type pendingRead struct {
	id     uint64
	req    ReadRequest
	placed uint32
	rtr    bool // a zero-length RTR Read (rtr.go): no Completion
}

// rdma is the QP state behind this file; it is embedded in QP.
type rdma struct {
	mem          MemTable
	ird, ord     int
	reads        []pendingRead // outstanding Read Requests, oldest first
	nextReadID   uint64
	respEnds     []int // txbuf end offset of each queued Read Response not yet written
	comps        []Completion
	remoteEvents bool

	// written counts the octets of completed RDMA Write messages placed
	// into the region watch names (WatchWrites).
	watch   STag
	written int

	// RDMA Write message being placed: where it started and its length.
	inWrite    bool
	writeSTag  STag
	writeStart uint64
	writeLen   int

	fault       error
	faultSegLen int
	faultDDP    []byte // the faulting segment's DDP header, for Terminate
	faultRDMA   []byte // its Read Request header, when it was one
}

// Mem returns the QP's memory table: the regions its peer may access.
func (q *QP) Mem() *MemTable { return &q.mem }

// Register is q.Mem().Register.
func (q *QP) Register(buf []byte, access Access) (STag, error) { return q.mem.Register(buf, access) }

// Invalidate is q.Mem().Invalidate: a local invalidation. Read Responses
// still queued from the region are copied out of it first (gather).
func (q *QP) Invalidate(s STag) bool {
	if r := q.mem.lookup(s); r != nil && len(q.holes) > 0 {
		q.fillHoles(r.buf)
	}
	return q.mem.Invalidate(s)
}

// WatchWrites starts counting the octets of the peer's completed RDMA
// Write messages into the region s (0: none), from zero: a ULP checks the
// peer's own report of what it wrote (SDP's RdmaWrCompl) against it.
func (q *QP) WatchWrites(s STag) { q.watch, q.written = s, 0 }

// Written is the count WatchWrites started.
func (q *QP) Written() int { return q.written }

// Rebind moves the valid region s to buf, which must be as long: the
// region's octets are copied into buf, and the rest of a direct placement
// into it lands in buf too. The STag stays valid, so the peer's operations
// go on as before, into buf; the old buffer is no longer touched. This is
// how a ULP takes its memory back from a transfer it cannot wait for.
func (q *QP) Rebind(s STag, buf []byte) bool {
	return q.rebind(s, buf, true)
}

// Detach is Rebind to a fresh buffer of the region's length, which it
// returns (nil if s is not valid), without reading the old one: for a ULP
// whose application may already have freed it (the call that lent it has
// returned), where the octets placed so far are not wanted. The peer's
// operations still land, in the fresh buffer.
func (q *QP) Detach(s STag) []byte {
	r := q.mem.lookup(s)
	if r == nil {
		return nil
	}
	buf := make([]byte, len(r.buf))
	q.rebind(s, buf, false)
	return buf
}

func (q *QP) rebind(s STag, buf []byte, keep bool) bool {
	r := q.mem.lookup(s)
	if r == nil || len(buf) != len(r.buf) {
		return false
	}
	old := r.buf
	if keep {
		copy(buf, old)
	}
	r.buf = buf
	q.moveHoles(old, buf)
	x := &q.direct
	if !x.active || STag(x.seg.STag) != s {
		return true
	}
	remap := func(b []byte) []byte {
		if !overlaps(b, old) {
			return b
		}
		off := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&old[0])))
		return buf[off : off+len(b) : off+len(b)]
	}
	for i := x.next; i < len(x.pieces); i++ {
		if x.pieces[i].mark == nil {
			x.pieces[i].b = remap(x.pieces[i].b)
		}
	}
	x.seg.Payload = remap(x.seg.Payload)
	return true
}

// SetReadLimits sets the IRD (Read Requests from the peer answered but not
// yet written) and the ORD (Read Requests posted here and not yet
// complete). Values below 1 are taken as 1.
func (q *QP) SetReadLimits(ird, ord int) {
	q.ird, q.ord = max(ird, 1), max(ord, 1)
}

// ReadLimits returns the IRD and ORD.
func (q *QP) ReadLimits() (ird, ord int) { return q.ird, q.ord }

// SetRemoteEvents makes the QP report the peer's operations on local memory
// as completions.
func (q *QP) SetRemoteEvents(on bool) { q.remoteEvents = on }

// PollCompletions appends the queued completions to dst and empties the
// queue.
func (q *QP) PollCompletions(dst []Completion) []Completion {
	dst = append(dst, q.comps...)
	q.comps = q.comps[:0]
	return dst
}

// OutstandingReads is the number of Read Requests posted here that have not
// completed.
func (q *QP) OutstandingReads() int { return len(q.reads) }

// PostWrite queues an RDMA Write of the concatenation of parts to the
// peer's region stag at offset to. The peer checks the access; this side
// cannot.
func (q *QP) PostWrite(stag STag, to uint64, parts ...[]byte) {
	q.postTagged(OpRDMAWrite, stag, to, parts)
}

// PostReadRequest queues an RDMA Read Request: the peer is asked to send
// r.Size octets from its region r.SrcSTag at r.SrcTO, which this QP places
// into its own region r.SinkSTag at r.SinkTO. The sink is checked here
// (registered, local write right, in bounds) before anything is sent. The
// returned id comes back in the CompReadDone completion.
func (q *QP) PostReadRequest(r ReadRequest) (uint64, error) {
	if len(q.reads) >= q.ord {
		return 0, ErrORDExceeded
	}
	if r.Size > 0 {
		if _, f := q.mem.check(STag(r.SinkSTag), r.SinkTO, int(r.Size), AccessLocalWrite); f != faultNone {
			return 0, fmt.Errorf("iwarp: Read Request sink: %w", placementErr(f, OpReadResponse, STag(r.SinkSTag), r.SinkTO, int(r.Size)))
		}
	}
	q.nextReadID++
	q.reads = append(q.reads, pendingRead{id: q.nextReadID, req: r})
	var b [ReadRequestHeaderLen]byte
	EncodeReadRequest(b[:], &r)
	q.postUntagged(OpReadRequest, QNReadRequest, 0, [][]byte{b[:]})
	return q.nextReadID, nil
}

// PostSendInvalidate queues a Send with Invalidate (or, with se, Send with
// Solicited Event and Invalidate): the peer invalidates its STag inv when
// the message arrives, before it delivers it.
func (q *QP) PostSendInvalidate(se bool, inv STag, parts ...[]byte) {
	op := OpSendInvalidate
	if se {
		op = OpSendSEInvalidate
	}
	q.postUntagged(op, QNSend, uint32(inv), parts)
}

// PostImmediate queues an RFC 7306 Immediate Data message (with se, the
// Solicited Event variant) carrying exactly 8 octets.
func (q *QP) PostImmediate(se bool, data [ImmediateDataLen]byte) {
	op := OpImmediate
	if se {
		op = OpImmediateSE
	}
	// From the QP's own copy: post copies it into the transmit buffer
	// before it returns, and data's own slice would escape to the heap.
	q.imm = data
	q.postUntagged(op, QNSend, 0, [][]byte{q.imm[:]})
}

// placeTagged checks a received tagged segment and copies its payload into
// the region it names.
func (q *QP) placeTagged(s *DDPSegment) error {
	switch s.Opcode() {
	case OpRDMAWrite:
		return q.placeWrite(s)
	case OpReadResponse:
		return q.placeReadResponse(s)
	}
	return rdmapErr(RDMAPErrTypeOperation, RDMAPErrOpcode, "unexpected tagged opcode %v", s.Opcode())
}

func (q *QP) placeWrite(s *DDPSegment) error {
	stag, n := STag(s.STag), len(s.Payload)
	if !q.inWrite {
		q.inWrite, q.writeSTag, q.writeStart, q.writeLen = true, stag, s.TO, 0
	}
	// A zero-length segment names no memory: RFC 6581's ready-to-receive
	// message is a zero-length RDMA Write with an arbitrary STag.
	if n > 0 {
		dst, f := q.mem.check(stag, s.TO, n, AccessRemoteWrite)
		if f != faultNone {
			return placementErr(f, OpRDMAWrite, stag, s.TO, n)
		}
		place(dst, s.Payload)
	}
	q.writeLen += n
	if s.Last {
		q.inWrite = false
		if q.watch != 0 && q.writeSTag == q.watch {
			q.written += q.writeLen
		}
		if q.remoteEvents && !q.rtrSeg {
			q.comps = append(q.comps, Completion{Kind: CompWritePlaced, STag: q.writeSTag, TO: q.writeStart, Len: q.writeLen})
		}
	}
	return nil
}

// placeReadResponse places a Read Response segment. Read Responses answer
// Read Requests in order (RFC 5040 §5.2.2), so each segment must continue
// the oldest outstanding request exactly: same sink STag, the next TO, and
// the Last flag on the octet that completes it. Like Linux siw, a mismatch
// of STag is reported as an invalid STag and one of offset or length as a
// base or bounds violation.
func (q *QP) placeReadResponse(s *DDPSegment) error {
	stag, n := STag(s.STag), len(s.Payload)
	if err := q.checkReadResponse(s, n); err != nil {
		return err
	}
	r := &q.reads[0]
	if n > 0 {
		dst, f := q.mem.check(stag, s.TO, n, AccessLocalWrite)
		if f != faultNone {
			return placementErr(f, OpReadResponse, stag, s.TO, n)
		}
		place(dst, s.Payload)
	}
	r.placed += uint32(n)
	if s.Last {
		if !r.rtr {
			q.comps = append(q.comps, Completion{Kind: CompReadDone, ID: r.id, STag: stag, TO: r.req.SinkTO, Len: int(r.req.Size)})
		}
		q.reads = q.reads[:copy(q.reads, q.reads[1:])]
	}
	return nil
}

// place copies a payload into its region, unless direct placement already
// put it there (the payload is the region's own bytes).
func place(dst, src []byte) {
	if len(dst) > 0 && len(src) > 0 && &dst[0] == &src[0] {
		return
	}
	copy(dst, src)
}

// checkReadResponse checks that a Read Response segment of n payload
// octets continues the oldest outstanding Read Request exactly.
func (q *QP) checkReadResponse(s *DDPSegment, n int) error {
	if len(q.reads) == 0 {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrOpcode, "Read Response with no Read Request outstanding")
	}
	r := &q.reads[0]
	stag := STag(s.STag)
	if s.STag != r.req.SinkSTag {
		return ddpErr(DDPErrTypeTagged, DDPErrInvalidSTag, "Read Response to STag %v, the Read Request named %v", stag, STag(r.req.SinkSTag))
	}
	if want := r.req.SinkTO + uint64(r.placed); s.TO != want {
		return ddpErr(DDPErrTypeTagged, DDPErrBaseBounds, "Read Response at TO %d, want %d", s.TO, want)
	}
	if uint64(r.placed)+uint64(n) > uint64(r.req.Size) || (s.Last && r.placed+uint32(n) != r.req.Size) {
		return ddpErr(DDPErrTypeTagged, DDPErrBaseBounds, "Read Response brings %d octets after %d (last: %t) for a Read of %d",
			n, r.placed, s.Last, r.req.Size)
	}
	return nil
}

// answerRead checks a received Read Request against the IRD and its source
// region and queues the Read Response.
func (q *QP) answerRead(s *DDPSegment) error {
	r, err := ParseReadRequest(s.Payload)
	if err != nil {
		return err
	}
	if len(q.respEnds) >= q.ird {
		// Linux siw's classification of an IRD overrun.
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrCatastrophicStream,
			"Read Request beyond the IRD of %d", q.ird)
	}
	var src []byte
	if r.Size > 0 {
		var f accessFault
		src, f = q.mem.check(STag(r.SrcSTag), r.SrcTO, int(r.Size), AccessRemoteRead)
		if f != faultNone {
			return readSourceErr(f, STag(r.SrcSTag), r.SrcTO, r.Size)
		}
	}
	if len(src) >= gatherMin {
		q.postTaggedGather(OpReadResponse, STag(r.SinkSTag), r.SinkTO, src) // sent from the region itself
	} else {
		q.postTagged(OpReadResponse, STag(r.SinkSTag), r.SinkTO, [][]byte{src})
	}
	q.respEnds = append(q.respEnds, len(q.txbuf))
	if q.remoteEvents && !q.rtrSeg {
		q.comps = append(q.comps, Completion{Kind: CompReadAnswered, STag: STag(r.SrcSTag), TO: r.SrcTO, Len: int(r.Size)})
	}
	return nil
}

// remoteInvalidate carries out the invalidation a Send with Invalidate
// asks for (RFC 5040 §5.3): an STag that is not valid here cannot be
// invalidated (remote operation error), and one whose region does not allow
// remote invalidation is protected (remote protection error), as in siw.
func (q *QP) remoteInvalidate(s *DDPSegment) error {
	stag := STag(s.InvalidateSTag)
	r := q.mem.lookup(stag)
	if r == nil {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrCannotInvalidate, "Send with Invalidate names STag %v, which is not valid", stag)
	}
	if r.access&AccessRemoteInvalidate == 0 {
		return rdmapErr(RDMAPErrTypeProtection, RDMAPErrCannotInvalidate, "Send with Invalidate names STag %v, whose region does not allow remote invalidation", stag)
	}
	q.mem.Invalidate(stag)
	if q.remoteEvents {
		q.comps = append(q.comps, Completion{Kind: CompInvalidated, STag: stag})
	}
	return nil
}

// retireResponses forgets Read Responses that are fully written, which
// frees their IRD slots.
func (q *QP) retireResponses() {
	i := 0
	for i < len(q.respEnds) && q.respEnds[i] <= q.txoff {
		i++
	}
	if i > 0 {
		q.respEnds = q.respEnds[:copy(q.respEnds, q.respEnds[i:])]
	}
}

// setFault records a protocol fault and the headers of the segment that
// caused it (ulpdu, when there was one) for PostTerminate.
func (q *QP) setFault(err error, ulpdu []byte) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	q.fault = e
	if len(ulpdu) >= 2 && len(ulpdu) >= DDPHeader(ulpdu).Len() {
		h := DDPHeader(ulpdu)
		q.faultDDP = append([]byte(nil), ulpdu[:h.Len()]...)
		q.faultSegLen = len(ulpdu)
		if !h.Tagged() && h.Opcode() == OpReadRequest && len(ulpdu) == DDPUntaggedHeaderLen+ReadRequestHeaderLen {
			q.faultRDMA = append([]byte(nil), ulpdu[DDPUntaggedHeaderLen:]...)
		}
	}
	return e
}

// Fault returns the protocol fault that stopped the receive path, or nil.
func (q *QP) Fault() error { return q.fault }

// terminatePayload builds the Terminate for err: when err is the QP's own
// fault, it carries the offending DDP header (and Read Request header) as
// RFC 5040 §4.8 asks, so the peer can tell which message failed.
func (q *QP) terminatePayload(dst []byte, err *Error) []byte {
	t := Terminate{TerminateCtrl: TerminateFor(err)}
	if err != nil && err == q.fault && q.faultDDP != nil {
		t.M = true
		t.SegLen = uint16(q.faultSegLen)
		t.DDPHeader = q.faultDDP
		t.RDMAHeader = q.faultRDMA
	}
	return AppendTerminate(dst, &t)
}

// termBuf sizes a Terminate payload: control, segment length, the longer
// DDP header and a Read Request header.
const termBufLen = TerminateHeaderLen + 2 + DDPUntaggedHeaderLen + ReadRequestHeaderLen

// readPending reports an outstanding Read Request of ours with data to come.
func (q *QP) readPending() bool {
	for _, r := range q.reads {
		if r.req.Size > 0 {
			return true
		}
	}
	return false
}
