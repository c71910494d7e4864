package iwarp

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FPDUs (RFC 5044 §4.1-4.4).
//
//	ULPDU_Length (2, big-endian) | ULPDU | PAD (0-3 zero octets) | CRC (4)
//
// with markers inserted at their stream positions (marker.go). The PAD makes
// 2+ULPDU_Length+PAD a multiple of 4; ULPDU_Length counts neither itself, the
// PAD, the CRC nor any marker. The CRC is CRC32C over everything from the
// first octet of the FPDU (its leading marker, if it has one) through the
// PAD, markers included, sent little-endian. With CRC off the field is sent
// as zero and not checked.
//
// A zero-length ULPDU is a well-formed FPDU: RFC 5044 sets no minimum, and it
// is DDP (ParseDDPSegment) that rejects a ULPDU too short for its header.
const (
	ulpduLenLen = 2
	crcLen      = 4
	maxULPDULen = math.MaxUint16

	noMarker = math.MaxInt
)

// zeroPad supplies PAD octets.
var zeroPad [3]byte

func padLen(ulen int) int { return (4 - (2+ulen)&3) & 3 }

// framing is the state shared by both directions: the negotiated options
// and the stream position, in octets since this direction's Full Operation
// began, that fixes where markers go.
type framing struct {
	markers  bool
	crc      bool
	spacing  int
	pos      uint64
	maxULPDU int
}

func newFraming(markers, crc bool, spacing int) framing {
	f := framing{markers: markers, crc: crc, spacing: normSpacing(spacing), maxULPDU: maxULPDULen}
	if markers {
		f.maxULPDU = maxULPDUMarkers(f.spacing)
	}
	return f
}

// layout returns, for an FPDU carrying ulen octets at the current position,
// the wire offset of its first marker, the number of markers and the total
// wire length.
func (f *framing) layout(ulen int) (first, count, wire int) {
	content := 2 + ulen + padLen(ulen)
	first, count = noMarker, 0
	if f.markers {
		first, count = markerLayout(int(f.pos%uint64(f.spacing)), content, f.spacing)
		if count == 0 {
			first = noMarker
		}
	}
	return first, count, content + MarkerLen*count + crcLen
}

func (f *framing) setPos(pos uint64) error {
	if pos%4 != 0 {
		return fmt.Errorf("iwarp: stream position %d is not a multiple of 4; FPDUs always are", pos)
	}
	f.pos = pos
	return nil
}

// TxFramer builds the FPDUs of one outgoing stream. It is not safe for
// concurrent use.
type TxFramer struct {
	framing
	stats  TxStats
	folded bool // appendFolded wrote the CRC of the FPDU being framed
	mk     [MarkerLen]byte
}

// TxStats counts what a TxFramer produced.
type TxStats struct {
	FPDUs, Markers uint64
	Bytes          uint64 // wire octets, markers included
}

// NewTxFramer returns a framer for a direction whose Full Operation starts
// at stream position 0. spacing 0 means DefaultMarkerSpacing; other values
// are rounded down to a multiple of 4 and clamped to [MinMarkerSpacing,
// MaxMarkerSpacing] (check them first with ValidMarkerSpacing).
func NewTxFramer(markers, crc bool, spacing int) *TxFramer {
	return &TxFramer{framing: newFraming(markers, crc, spacing)}
}

// Pos is the number of octets framed since Full Operation began.
func (f *TxFramer) Pos() uint64 { return f.pos }

// SetPos moves the stream position, which must be a multiple of 4.
func (f *TxFramer) SetPos(pos uint64) error { return f.setPos(pos) }

func (f *TxFramer) Markers() bool { return f.markers }
func (f *TxFramer) CRC() bool     { return f.crc }
func (f *TxFramer) Spacing() int  { return f.spacing }

// MaxULPDU is the longest ULPDU AppendFPDU accepts: 65535, or with markers
// somewhat less, so that every FPDUPTR fits 16 bits wherever the FPDU
// starts (65022 at spacing 512).
func (f *TxFramer) MaxULPDU() int { return f.maxULPDU }

// MULPDU is the largest ULPDU whose FPDU fits a TCP segment of emss octets
// with this framer's markers and spacing (see the package function MULPDU).
func (f *TxFramer) MULPDU(emss int) int { return mulpdu(emss, f.markers, f.spacing) }

// WireLen is the number of octets AppendFPDU writes for a ULPDU of ulen
// octets at the current position, markers included.
func (f *TxFramer) WireLen(ulen int) int {
	_, _, wire := f.layout(ulen)
	return wire
}

// Stats returns the counters.
func (f *TxFramer) Stats() TxStats { return f.stats }

// AppendFPDU appends one FPDU whose ULPDU is the concatenation of parts and
// advances the position. Each part is copied once, straight into dst around
// the marker gaps, and the CRC is then computed over the finished octets. It
// allocates only when dst lacks capacity.
//
// The ULPDU must not exceed MaxULPDU; if it does, dst is returned unchanged
// and nothing is counted, which the caller can detect by its length.
func (f *TxFramer) AppendFPDU(dst []byte, parts ...[]byte) []byte {
	ulen := 0
	for _, p := range parts {
		ulen += len(p)
	}
	if ulen > f.maxULPDU {
		return dst
	}
	first, count, wire := f.layout(ulen)

	dst, out := extend(dst, wire)

	end := wire - crcLen // octets covered by the CRC
	if f.crc && ulen >= encodeFoldMin+512 && encodeFolds(f.spacing) {
		f.appendFolded(out, parts, ulen, first, count)
	} else if count == 0 {
		// No marker falls in this FPDU: plain copies.
		binary.BigEndian.PutUint16(out, uint16(ulen))
		o := ulpduLenLen
		for _, p := range parts {
			o += copy(out[o:], p)
		}
		clear(out[o:end])
	} else {
		w := f.beginFPDU(out, ulen, first, count)
		for _, p := range parts {
			w.put(p)
		}
		w.put(zeroPad[:padLen(ulen)])
		if w.o == w.next {
			// A marker right after the PAD precedes the CRC and is covered by it.
			EncodeMarker(out[w.o:], uint16(w.o-w.hdr))
		}
	}

	if f.crc && !f.folded {
		binary.LittleEndian.PutUint32(out[end:], CRC32C(out[:end]))
	} else if !f.crc {
		binary.LittleEndian.PutUint32(out[end:], 0)
	}
	f.folded = false

	f.pos += uint64(wire)
	f.stats.FPDUs++
	f.stats.Markers += uint64(count)
	f.stats.Bytes += uint64(wire)
	return dst
}

// beginFPDU starts an FPDU in out: the leading marker when the FPDU starts
// on a marker position, then ULPDU_Length; the writer goes on from there.
func (f *TxFramer) beginFPDU(out []byte, ulen, first, count int) fpduWriter {
	w := fpduWriter{out: out, next: first, spacing: f.spacing}
	if count > 0 && first == 0 {
		EncodeMarker(out, 0)
		w.o, w.next = MarkerLen, f.spacing
	}
	w.hdr = w.o
	var lenField [ulpduLenLen]byte
	binary.BigEndian.PutUint16(lenField[:], uint16(ulen))
	w.put(lenField[:])
	return w
}

// appendFolded writes the FPDU content and CRC into out in one pass over
// the last part where the CPU can (crc_amd64.s): the wire octets are built
// 64 at a time in vector registers, markers included, stored, and folded
// into the CRC while still in registers. The first 256 wire octets and the
// last few hundred go through fpduWriter.
func (f *TxFramer) appendFolded(out []byte, parts [][]byte, ulen, first, count int) {
	end := len(out) - crcLen
	w := f.beginFPDU(out, ulen, first, count)
	crc, done := uint32(0), 0
	for i, p := range parts {
		if i == len(parts)-1 && w.o < 256 {
			p = p[w.putUntil(p, 256):]
			if w.o == 256 && len(p) >= encodeFoldMin {
				used, c := w.foldRest(p)
				crc, done = c, w.o
				p = p[used:]
			}
		}
		w.put(p)
	}
	w.put(zeroPad[:padLen(ulen)])
	if w.o == w.next {
		EncodeMarker(out[w.o:], uint16(w.o-w.hdr))
	}
	if done > 0 {
		crc = UpdateCRC32C(crc, out[done:end])
	} else {
		crc = CRC32C(out[:end])
	}
	binary.LittleEndian.PutUint32(out[end:], crc)
	f.folded = true
}

// count advances the position and the counters by an FPDU of ulen octets
// framed elsewhere (streamtx.go), without markers.
func (f *TxFramer) count(ulen int) {
	_, _, wire := f.layout(ulen)
	f.pos += uint64(wire)
	f.stats.FPDUs++
	f.stats.Bytes += uint64(wire)
}

// rewind takes back the last FPDU, which carried ulen octets and was framed
// at position pos, so that it can be framed again.
func (f *TxFramer) rewind(pos uint64, ulen int) {
	f.pos = pos
	_, count, wire := f.layout(ulen)
	f.stats.FPDUs--
	f.stats.Markers -= uint64(count)
	f.stats.Bytes -= uint64(wire)
}

// fpduWriter copies FPDU content into out, stepping over marker positions.
type fpduWriter struct {
	out     []byte
	o       int // next octet of out to write
	next    int // offset of the next marker, or noMarker
	hdr     int // offset of ULPDU_Length
	spacing int
}

// putUntil copies from src until the FPDU reaches wire offset limit (a
// multiple of 4) or src ends, and returns the octets it took.
func (w *fpduWriter) putUntil(src []byte, limit int) int {
	used := 0
	for len(src) > 0 && w.o < limit {
		if w.o == w.next {
			EncodeMarker(w.out[w.o:], uint16(w.o-w.hdr))
			w.o += MarkerLen
			w.next += w.spacing
			continue
		}
		n := copy(w.out[w.o:min(w.next, limit)], src)
		w.o += n
		src = src[n:]
		used += n
	}
	return used
}

func (w *fpduWriter) put(src []byte) {
	for len(src) > 0 {
		if w.o == w.next {
			EncodeMarker(w.out[w.o:], uint16(w.o-w.hdr))
			w.o += MarkerLen
			w.next += w.spacing
		}
		n := copy(w.out[w.o:min(w.next, len(w.out))], src)
		w.o += n
		src = src[n:]
	}
}

// RxDeframer recovers the ULPDUs of one incoming stream. It is not safe for
// concurrent use. After it returns an *Error the stream is out of step and
// must be terminated.
type RxDeframer struct {
	framing
	stats RxStats
}

// RxStats counts what an RxDeframer accepted and rejected.
type RxStats struct {
	FPDUs, Markers uint64
	Bytes          uint64 // wire octets of accepted FPDUs, markers included
	CRCBytes       uint64 // octets run through CRC32C
	CRCErrors      uint64
}

// NewRxDeframer returns a deframer for a direction whose Full Operation
// starts at stream position 0; spacing is treated as by NewTxFramer.
func NewRxDeframer(markers, crc bool, spacing int) *RxDeframer {
	d := &RxDeframer{framing: newFraming(markers, crc, spacing)}
	// A peer may send any length whose markers it can encode; only the
	// markers themselves are checked unless SetMaxULPDU says otherwise.
	d.maxULPDU = maxULPDULen
	return d
}

// Pos is the number of octets consumed since Full Operation began.
func (d *RxDeframer) Pos() uint64 { return d.pos }

// SetPos moves the stream position, which must be a multiple of 4.
func (d *RxDeframer) SetPos(pos uint64) error { return d.setPos(pos) }

func (d *RxDeframer) Markers() bool { return d.markers }
func (d *RxDeframer) CRC() bool     { return d.crc }
func (d *RxDeframer) Spacing() int  { return d.spacing }

// SetMaxULPDU makes FPDUs whose ULPDU_Length exceeds n a protocol fault as
// soon as the length field arrives, instead of waiting for the whole FPDU.
// Use it with the MULPDU the peer was told, or the receive buffer's size.
// The fault is classified as MPA error 3 (marker and ULPDU_Length mismatch),
// MPA's only code for a ULPDU_Length it cannot accept.
func (d *RxDeframer) SetMaxULPDU(n int) { d.maxULPDU = min(max(n, 0), maxULPDULen) }

// Stats returns the counters.
func (d *RxDeframer) Stats() RxStats { return d.stats }

// FrameLen returns the wire length of the FPDU that starts buf, once buf
// holds its ULPDU_Length (and leading marker, if any), so a caller can size
// its next read. It returns ErrNeedMore before that, and an *Error for a bad
// leading marker or an over-long ULPDU_Length.
func (d *RxDeframer) FrameLen(buf []byte) (int, error) {
	_, _, _, wire, err := d.header(buf)
	return wire, err
}

// header decodes the start of the FPDU at buf: the offset of ULPDU_Length,
// its value and the FPDU's marker layout.
func (d *RxDeframer) header(buf []byte) (hdr, ulen, first, wire int, err error) {
	if d.markers && d.pos%uint64(d.spacing) == 0 {
		if len(buf) < MarkerLen {
			return 0, 0, 0, 0, ErrNeedMore
		}
		if m := Marker(buf); m.Reserved() != 0 || m.FPDUPTR() != 0 {
			return 0, 0, 0, 0, mpaErr(MPAErrMarker, "leading marker at stream offset %d is %#08x, want 0x00000000",
				d.pos, binary.BigEndian.Uint32(buf))
		}
		hdr = MarkerLen
	}
	if len(buf) < hdr+ulpduLenLen {
		return 0, 0, 0, 0, ErrNeedMore
	}
	ulen = int(binary.BigEndian.Uint16(buf[hdr:]))
	if ulen > d.maxULPDU {
		return 0, 0, 0, 0, mpaErr(MPAErrMarker, "ULPDU_Length %d at stream offset %d exceeds the limit of %d",
			ulen, d.pos+uint64(hdr), d.maxULPDU)
	}
	first, _, wire = d.layout(ulen)
	return hdr, ulen, first, wire, nil
}

// Next takes buf, whose first octet is at the deframer's stream position.
// When buf holds a whole FPDU, Next checks every marker (reserved half 0,
// FPDUPTR pointing at ULPDU_Length) and the CRC, then removes the markers by
// moving the ULPDU's pieces together inside buf, and returns the ULPDU (a
// sub-slice of buf) and the number of octets of buf the FPDU occupied; the
// position advances by n. When buf is only a prefix of an FPDU it returns
// ErrNeedMore and modifies neither buf nor the deframer. Faults are *Error.
// Next does not allocate, except to build an *Error.
func (d *RxDeframer) Next(buf []byte) (ulpdu []byte, n int, err error) {
	hdr, ulen, first, wire, err := d.header(buf)
	if err != nil {
		return nil, 0, err
	}
	if len(buf) < wire {
		return nil, 0, ErrNeedMore
	}
	fr := buf[:wire:wire]
	markers, err := d.check(fr, hdr, ulen, first)
	if err != nil {
		return nil, 0, err
	}

	// Close the marker gaps: each piece of ULPDU between markers moves left
	// over the markers already passed. Only markers after ULPDU_Length and
	// before the ULPDU's end are in the way.
	lo := hdr + ulpduLenLen
	if markers > 0 {
		end := wire - crcLen
		dstOff, srcOff, left := lo, lo, ulen
		o := first
		if o < hdr {
			o += d.spacing
		}
		for ; left > 0 && o < end; o += d.spacing {
			k := min(o-srcOff, left)
			if dstOff != srcOff {
				copy(fr[dstOff:dstOff+k], fr[srcOff:srcOff+k])
			}
			dstOff += k
			srcOff += k + MarkerLen
			left -= k
		}
		if left > 0 && dstOff != srcOff {
			copy(fr[dstOff:dstOff+left], fr[srcOff:srcOff+left])
		}
	}
	d.advance(wire, markers)
	return fr[lo : lo+ulen : lo+ulen], wire, nil
}

// check verifies the whole FPDU fr (header's results for it), read-only:
// every marker (reserved half 0, FPDUPTR pointing at ULPDU_Length) and
// the CRC. It returns the number of markers.
func (d *RxDeframer) check(fr []byte, hdr, ulen, first int) (int, error) {
	end := len(fr) - crcLen // CRC-covered octets: everything before the CRC
	markers := 0
	for o := first; o < end; o += d.spacing {
		m := Marker(fr[o:])
		want := o - hdr
		if o < hdr {
			want = 0
		}
		if m.Reserved() != 0 || int(m.FPDUPTR()) != want {
			return 0, mpaErr(MPAErrMarker, "marker at stream offset %d is %#08x, want FPDUPTR %#x (ULPDU_Length %d at stream offset %d)",
				d.pos+uint64(o), binary.BigEndian.Uint32(fr[o:]), want, ulen, d.pos+uint64(hdr))
		}
		markers++
	}
	if d.crc {
		got := binary.LittleEndian.Uint32(fr[end:])
		want := CRC32C(fr[:end])
		d.stats.CRCBytes += uint64(end)
		if got != want {
			d.stats.CRCErrors++
			return 0, mpaErr(MPAErrCRC, "bad CRC (got %#08x, want %#08x) in FPDU of %d octets at stream offset %d",
				got, want, len(fr), d.pos)
		}
	}
	return markers, nil
}

// advance moves the position past an accepted FPDU of wire octets.
func (d *RxDeframer) advance(wire, markers int) {
	d.pos += uint64(wire)
	d.stats.FPDUs++
	d.stats.Markers += uint64(markers)
	d.stats.Bytes += uint64(wire)
}

// gather copies the ULPDU octets [from, from+len(dst)) of the FPDU fr
// (header's results for it) into dst, leaving out the markers between
// them: one pass from the wire form into the reader's memory, where Next
// closes the gaps in place and the reader then copies the ULPDU out.
func (d *RxDeframer) gather(dst, fr []byte, hdr, first, ulen, from int) {
	end := len(fr) - crcLen
	src, u, to := hdr+ulpduLenLen, 0, from+len(dst) // ULPDU octet u lies at fr[src]
	o := first
	if o < hdr {
		o += d.spacing
	}
	for u < to {
		k := ulen - u // octets up to the next marker or the ULPDU's end
		if o < end {
			k = min(k, o-src)
		}
		if k < 0 || (k == 0 && src != o) {
			return // not an FPDU header's layout: nothing more to take
		}
		if lo, hi := max(u, from), min(u+k, to); lo < hi {
			copy(dst[lo-from:hi-from], fr[src+lo-u:src+hi-u])
		}
		u, src = u+k, src+k
		if o < end && src == o {
			src += MarkerLen
			o += d.spacing
		}
	}
}

// extend lengthens dst by n bytes, growing it with some slack when its
// capacity is short, and returns it with the n new bytes.
func extend(dst []byte, n int) ([]byte, []byte) {
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n+(start+n)/4)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+n]
	return dst, dst[start:]
}
