package iwarp

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Direct placement: the payload of a tagged FPDU (RDMA Write, Read
// Response) read from the socket straight into the registered region it
// names, with one recvmsg over an iovec list that interleaves the region's
// bytes with small side slots for the markers, the PAD and the CRC. No
// intermediate buffer holds the payload.
//
// When. Fill starts it once the received bytes are the start of a tagged
// FPDU whose headers are all there (leading marker, ULPDU_Length, DDP
// header) and at least directMin octets of it are still to come, and the
// segment passes every check a placement makes (STag valid, right present,
// [TO, TO+len) inside the region; for a Read Response, the continuation of
// the oldest Read Request). A segment that fails a check is not placed
// directly: it arrives in the receive chunk and faults there, writing
// nothing, as before. Small FPDUs (an MSS of 1448 gives at most 1430 ULPDU
// octets) mostly arrive whole with the read before them and take the
// ordinary path; direct placement pays off for the large FPDUs of a large
// MSS (loopback: 65483).
//
// CRC. The CRC and the markers can only be checked once the last octet
// has arrived, after the payload is in the region. This is what Linux siw
// does (siw_rx_umem copies into the target memory and runs the CRC over
// it; a mismatch then terminates the QP with an MPA CRC error), and what
// RFC 5040 allows: a tagged buffer's contents are undefined until the
// message that fills it completes, and after a fault the connection is
// over. So for direct placement "nothing is written" means precisely:
// nothing outside [TO, TO+len) of a region whose STag, rights and bounds
// were checked before the first octet moved, no completion (no
// CompWritePlaced, no CompReadDone), and the fault is sticky, so nothing
// later is placed either. The octets inside that range are undefined, as
// the RFC says. The STag stays valid (siw does not invalidate either): the
// region is the ULP's, and it learns from the fault that the transfer
// failed. A ULP that wants a region untouched by any FPDU whose CRC failed
// turns direct placement off (SetDirectPlacement(false)): every FPDU is
// then staged in the receive chunk and checked before it is copied.

// directMin is the least number of missing FPDU octets worth a direct read.
const directMin = 2048

// maxIov bounds one recvmsg's iovec list (IOV_MAX on Linux is 1024).
const maxIov = 1024

// directPiece is one run of wire octets still to arrive.
type directPiece struct {
	b      []byte
	mark   []byte // for a marker slot, all 4 octets (b may be its tail)
	marker int    // FPDUPTR the marker must carry
}

// direct is the FPDU being placed; it is embedded in QP.
type direct struct {
	off        bool // SetDirectPlacement(false)
	active     bool
	pieces     []directPiece
	next, done int // pieces[next] has done octets received
	crc        uint32
	side       []byte // marker, PAD and CRC slots
	iov        []unix.Iovec
	seg        DDPSegment // headers; Payload is the region's bytes
	hdr        [DDPTaggedHeaderLen]byte
	wire       int // FPDU wire length
	have       int // FPDU octets that were in the chunk when it started
	markers    int
	placed     uint64 // payload octets placed directly (DirectPlaced)
}

// SetDirectPlacement turns direct placement on (the default) or off.
func (q *QP) SetDirectPlacement(on bool) { q.direct.off = !on }

// DirectPlaced is the number of payload octets read from the socket
// straight into registered regions.
func (q *QP) DirectPlaced() uint64 { return q.direct.placed }

// contentWire maps an offset in ULPDU_Length|ULPDU|PAD to its wire offset
// in the FPDU: hdr is the leading marker's length (0 or 4), and the markers
// after ULPDU_Length start at wire offset f (noMarker for none).
func contentWire(c, hdr, f, spacing int) int {
	w := c + hdr
	if f != noMarker && c >= f-hdr {
		w += MarkerLen * ((c-(f-hdr))/(spacing-MarkerLen) + 1)
	}
	return w
}

// startDirect sets up direct placement for the partial FPDU at the start of
// the unparsed bytes, if it qualifies.
func (q *QP) startDirect() bool {
	if q.direct.off || !q.full || q.fault != nil || q.expectRTR != 0 || q.cur == nil {
		return false
	}
	buf := q.cur.buf[q.rxr:q.rxw]
	d := q.rx
	hdr, ulen, first, wire, err := d.header(buf)
	if err != nil || wire-len(buf) < directMin || ulen < DDPTaggedHeaderLen {
		return false
	}
	// Markers after ULPDU_Length: the first one, unless it is the leading
	// marker, whose successor comes spacing octets later.
	f := first
	if hdr > 0 {
		f = d.spacing
	}
	contentLen := 2 + ulen + padLen(ulen)
	if f != noMarker && f > hdr+contentLen {
		f = noMarker
	}
	// The DDP header must be all there.
	hdrEnd := ulpduLenLen + DDPTaggedHeaderLen
	if contentWire(hdrEnd-1, hdr, f, d.spacing) >= len(buf) {
		return false
	}
	x := &q.direct
	for c := 0; c < DDPTaggedHeaderLen; c++ {
		x.hdr[c] = buf[contentWire(ulpduLenLen+c, hdr, f, d.spacing)]
	}
	if !DDPHeader(x.hdr[:]).Tagged() {
		return false
	}
	seg, err := ParseDDPSegment(x.hdr[:])
	if err != nil {
		return false
	}
	n := ulen - DDPTaggedHeaderLen
	seg.Payload = nil
	var dst []byte
	var fl accessFault
	switch seg.Opcode() {
	case OpRDMAWrite:
		dst, fl = q.mem.check(STag(seg.STag), seg.TO, n, AccessRemoteWrite)
	case OpReadResponse:
		if q.checkReadResponse(&seg, n) != nil {
			return false
		}
		dst, fl = q.mem.check(STag(seg.STag), seg.TO, n, AccessLocalWrite)
	default:
		return false
	}
	if fl != faultNone {
		return false
	}
	// Lay out the rest of the FPDU: the region's bytes, marker slots and
	// PAD slot, in wire order, then the CRC slot. What is already in buf
	// is checked (markers) or copied (payload) now.
	x.pieces = x.pieces[:0]
	count := 0
	if f != noMarker {
		count = (contentLen-(f-hdr))/(d.spacing-MarkerLen) + 1
	}
	if cap(x.side) < MarkerLen*count+8 {
		x.side = make([]byte, 0, MarkerLen*count+64)
	}
	side := x.side[:0]
	have := len(buf)
	// Every marker already received must be right before any octet moves
	// into the region: a wrong one is left to the ordinary path to report.
	for k := 0; k < count && f+k*d.spacing+MarkerLen <= have; k++ {
		o := f + k*d.spacing
		if m := Marker(buf[o:]); m.Reserved() != 0 || int(m.FPDUPTR()) != o-hdr {
			return false
		}
	}
	crcEnd := wire - crcLen
	pay0 := ulpduLenLen + DDPTaggedHeaderLen // content offset of the payload
	w, c := hdr, 0
	if hdr > 0 {
		x.markers = 1
	} else {
		x.markers = 0
	}
	for k := 0; w < crcEnd; {
		mk := noMarker
		if f != noMarker && k < count {
			mk = f + k*d.spacing
		}
		if w == mk {
			want := w - hdr
			if w+MarkerLen > have { // (received ones were checked above)
				// The marker may have begun in buf: its slot starts with
				// those octets, and only the rest is read.
				side = append(side, 0, 0, 0, 0)
				slot := side[len(side)-MarkerLen:]
				got := 0
				if w < have {
					got = copy(slot, buf[w:have])
				}
				x.pieces = append(x.pieces, directPiece{b: slot[got:], mark: slot, marker: want})
			}
			x.markers++
			w += MarkerLen
			k++
			continue
		}
		run := min(mk, crcEnd) - w
		// Content [c, c+run) sits at wire [w, w+run): header, payload, PAD.
		for run > 0 {
			var part int
			switch {
			case c < pay0:
				part = min(run, pay0-c)
			case c < pay0+n:
				part = min(run, pay0+n-c)
			default:
				part = run
			}
			lo, hi := w, w+part
			if c >= pay0 && c < pay0+n {
				po := c - pay0
				if lo < have {
					k := min(hi, have) - lo
					copy(dst[po:po+k], buf[lo:lo+k])
					po += k
					lo += k
				}
				if lo < hi {
					x.pieces = append(x.pieces, directPiece{b: dst[po : po+hi-lo]})
				}
			} else if hi > have {
				if c < pay0 {
					return false // cannot happen: the header is in buf
				}
				k := max(lo, have)
				side = append(side, make([]byte, hi-k)...)
				x.pieces = append(x.pieces, directPiece{b: side[len(side)-(hi-k):]})
			}
			w += part
			c += part
			run -= part
		}
	}
	side = append(side, 0, 0, 0, 0)
	x.pieces = append(x.pieces, directPiece{b: side[len(side)-crcLen:]})
	x.side = side
	x.crc = 0
	if d.crc {
		x.crc = CRC32C(buf)
	}
	seg.Payload = dst
	x.seg = seg
	x.wire, x.have, x.next, x.done, x.active = wire, have, 0, 0, true
	return true
}

// fillDirect receives what the socket holds into the pieces.
func (q *QP) fillDirect() (int, error) {
	x := &q.direct
	x.iov = x.iov[:0]
	for i := x.next; i < len(x.pieces) && len(x.iov) < maxIov; i++ {
		b := x.pieces[i].b
		if i == x.next {
			b = b[x.done:]
		}
		var v unix.Iovec
		v.Base = &b[0]
		v.SetLen(len(b))
		x.iov = append(x.iov, v)
	}
	var msg unix.Msghdr
	msg.Iov = &x.iov[0]
	msg.SetIovlen(len(x.iov))
	var n uintptr
	for {
		r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(q.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
		runtime.KeepAlive(x.pieces)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		n = r
		break
	}
	if n == 0 {
		q.eof = true
		return 0, ErrClosed
	}
	left := int(n)
	last := len(x.pieces) - 1
	for left > 0 {
		p := x.pieces[x.next].b[x.done:]
		k := min(left, len(p))
		if q.rx.crc && x.next < last {
			x.crc = UpdateCRC32C(x.crc, p[:k])
		}
		left -= k
		x.done += k
		if x.done == len(x.pieces[x.next].b) {
			x.next++
			x.done = 0
		}
	}
	if x.next == len(x.pieces) {
		q.finishDirect()
	}
	return int(n), nil
}

// finishDirect checks the markers and the CRC of the FPDU just received
// and completes the placement, or records the fault.
func (q *QP) finishDirect() {
	x := &q.direct
	x.active = false
	d := q.rx
	q.rxr = q.rxw // the chunk's unparsed bytes were this FPDU's start
	for _, p := range x.pieces {
		if p.mark == nil {
			continue
		}
		if m := Marker(p.mark); m.Reserved() != 0 || int(m.FPDUPTR()) != p.marker {
			q.directFault(mpaErr(MPAErrMarker, "marker in FPDU at stream offset %d is %#08x, want FPDUPTR %#x",
				d.pos, binary.BigEndian.Uint32(p.mark), p.marker))
			return
		}
	}
	if d.crc {
		got := binary.LittleEndian.Uint32(x.pieces[len(x.pieces)-1].b)
		d.stats.CRCBytes += uint64(x.wire - crcLen)
		if got != x.crc {
			d.stats.CRCErrors++
			q.directFault(mpaErr(MPAErrCRC, "bad CRC (got %#08x, want %#08x) in FPDU of %d octets at stream offset %d, placed directly into STag %v",
				got, x.crc, x.wire, d.pos, STag(x.seg.STag)))
			return
		}
	}
	d.pos += uint64(x.wire)
	d.stats.FPDUs++
	d.stats.Markers += uint64(x.markers)
	d.stats.Bytes += uint64(x.wire)
	seg := x.seg
	if err := q.placeTagged(&seg); err != nil {
		q.directFault(err)
		return
	}
	x.placed += uint64(len(seg.Payload))
}

// divertDirect keeps a direct placement into the region of s, which was
// just invalidated, from writing another octet there: the rest of its
// payload is received into a scratch buffer, and when the FPDU is complete
// its placement fails the STag check, as a staged one would.
func (q *QP) divertDirect(s STag) {
	x := &q.direct
	if !x.active || STag(x.seg.STag) != s {
		return
	}
	for i := x.next; i < len(x.pieces)-1; i++ {
		p := &x.pieces[i]
		if p.mark != nil || !overlaps(p.b, x.seg.Payload) {
			continue
		}
		scratch := make([]byte, len(p.b))
		if i == x.next {
			copy(scratch[:x.done], p.b[:x.done])
		}
		p.b = scratch
	}
	x.seg.Payload = make([]byte, len(x.seg.Payload))
}

// overlaps reports whether b lies inside r.
func overlaps(b, r []byte) bool {
	if len(b) == 0 || len(r) == 0 {
		return false
	}
	lo, hi := uintptr(unsafe.Pointer(&r[0])), uintptr(unsafe.Pointer(&r[0]))+uintptr(len(r))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < hi
}

// directFault records a fault of the FPDU being placed, with its DDP header
// for the Terminate.
func (q *QP) directFault(err error) {
	x := &q.direct
	_ = q.setFault(err, x.hdr[:])
	q.faultSegLen = DDPTaggedHeaderLen + len(x.seg.Payload)
}
