package iwarp

import "encoding/binary"

// Two more ways to put a ULPDU on the wire besides AppendFPDU (which copies
// the caller's parts into a marker-gapped transmit buffer):
//
//   - In place (integrated buffering: Balaji, Bhagvat, Thakur and Panda,
//     "Sockets Direct Protocol for Hybrid Network Stacks: A Case Study with
//     iWARP over 10G Ethernet", §4.1): ReserveFPDU tells the
//     caller where the ULPDU's octets go in the transmit buffer, between the
//     marker gaps, for the current stream position; the caller writes its
//     data there itself (its one copy), and SealFPDU fills ULPDU_Length, the
//     markers, the PAD and the CRC around it. The buffer is then sent as is.
//   - Gather (the scatter/gather marker insertion of Balaji, Feng, Bhagvat,
//     Panda, Thakur and Gropp, "Analyzing the Impact of Supporting
//     Out-of-Order Communication on In-order Performance with iWARP",
//     §III-B): GatherFPDU copies nothing of the ULPDU. It returns an iovec
//     list that interleaves the caller's own slices with the few framing
//     octets (ULPDU_Length, markers, PAD, CRC) kept in a small side buffer,
//     for writev/sendmsg. The CRC runs over the caller's bytes where they
//     are.
//
// All three put the same octets on the wire for the same position.

// Reserved is an FPDU whose framing SealFPDU has yet to write.
type Reserved struct {
	// Pieces are the ULPDU's octets, in order, as sub-slices of the
	// transmit buffer: the caller fills them.
	Pieces [][]byte
	fpdu   []byte
	ulen   int
	first  int
	count  int
	pad    int // wire offset of the PAD, right after the ULPDU
}

// ReserveFPDU grows dst by the wire length of an FPDU carrying ulen octets
// at the current position and returns the grown buffer and where in it the
// ULPDU goes. Nothing else may be framed before SealFPDU. ulen must not
// exceed MaxULPDU. pieces is reused for Reserved.Pieces.
func (f *TxFramer) ReserveFPDU(dst []byte, ulen int, pieces [][]byte) ([]byte, Reserved) {
	first, count, wire := f.layout(ulen)
	dst, out := extend(dst, wire)
	r := Reserved{Pieces: pieces[:0], fpdu: out, ulen: ulen, first: first, count: count}
	hdr := 0
	next := first
	if count > 0 && first == 0 {
		hdr, next = MarkerLen, f.spacing
	}
	o, left := hdr+ulpduLenLen, ulen
	for left > 0 {
		if o == next {
			o += MarkerLen
			next += f.spacing
		}
		n := min(left, next-o)
		r.Pieces = append(r.Pieces, out[o:o+n:o+n])
		o += n
		left -= n
	}
	// The PAD never has a marker before it: a marker lies on a 4-octet
	// boundary of ULPDU_Length|ULPDU|PAD, and the ULPDU ends off one
	// whenever there is a PAD.
	r.pad = o
	return dst, r
}

// SealFPDU writes the framing of r (ULPDU_Length, markers, PAD, CRC over
// the filled ULPDU) and advances the position past it.
func (f *TxFramer) SealFPDU(r Reserved) { f.SealFPDUHoles(r, nil) }

// Hole is a part of a reserved FPDU that the caller did not fill: its
// octets are Src, which goes on the wire in its place (gather).
type Hole struct {
	Off int // offset in the FPDU
	Src []byte
}

// SealFPDUHoles is SealFPDU for an FPDU whose holes, in order, are not
// filled: the CRC runs over their Src octets instead.
func (f *TxFramer) SealFPDUHoles(r Reserved, holes []Hole) { f.sealFPDU(r, holes, nil) }

// sealFPDUParts is SealFPDUHoles for an FPDU whose ULPDU is parts: a
// large one's CRC is folded from them in one pass (gatherCRC).
func (f *TxFramer) sealFPDUParts(r Reserved, holes []Hole, parts [][]byte) {
	f.sealFPDU(r, holes, parts)
}

func (f *TxFramer) sealFPDU(r Reserved, holes []Hole, parts [][]byte) {
	out := r.fpdu
	end := len(out) - crcLen
	hdr := 0
	for k := 0; k < r.count; k++ {
		o := r.first + k*f.spacing
		if o == 0 {
			hdr = MarkerLen // a leading marker: FPDUPTR 0, ULPDU_Length after it
		}
		EncodeMarker(out[o:], uint16(max(o-hdr, 0)))
	}
	binary.BigEndian.PutUint16(out[hdr:], uint16(r.ulen))
	clear(out[r.pad : r.pad+padLen(r.ulen)])
	var crc uint32
	folded := false
	if f.crc && parts != nil && r.ulen >= encodeFoldMin+512 {
		crc, folded = f.gatherCRC(parts, r.ulen, r.first, r.count)
	}
	if f.crc && !folded {
		at := 0
		for _, h := range holes {
			crc = UpdateCRC32C(crc, out[at:h.Off])
			crc = UpdateCRC32C(crc, h.Src)
			at = h.Off + len(h.Src)
		}
		crc = UpdateCRC32C(crc, out[at:end])
	}
	binary.LittleEndian.PutUint32(out[end:], crc)
	f.pos += uint64(len(out))
	f.stats.FPDUs++
	f.stats.Markers += uint64(r.count)
	f.stats.Bytes += uint64(len(out))
}

// GatherFPDU frames one FPDU whose ULPDU is the concatenation of parts
// without copying it: it appends to iov the FPDU's octets in wire order,
// the framing octets as slices of side (to which it appends them) and the
// ULPDU as sub-slices of parts, and returns both. The parts must not change
// until the iovecs are written. A ULPDU over MaxULPDU is refused: iov and
// side come back unchanged.
func (f *TxFramer) GatherFPDU(iov [][]byte, side []byte, parts ...[]byte) ([][]byte, []byte) {
	ulen := 0
	for _, p := range parts {
		ulen += len(p)
	}
	if ulen > f.maxULPDU {
		return iov, side
	}
	first, count, wire := f.layout(ulen)
	// A large ULPDU's CRC is folded from the parts in one pass
	// (gatherCRC); the iovecs are then built without summing.
	sum, folded := uint32(0), false
	if f.crc && ulen >= encodeFoldMin+512 {
		sum, folded = f.gatherCRC(parts, ulen, first, count)
	}
	g := gatherer{iov: iov, side: side, next: first, spacing: f.spacing, crc: f.crc && !folded}
	if count > 0 && first == 0 {
		g.marker(0)
		g.next = f.spacing
	}
	g.hdr = g.o
	g.side = binary.BigEndian.AppendUint16(g.side, uint16(ulen))
	g.put(g.side[len(g.side)-ulpduLenLen:])
	for _, p := range parts {
		g.put(p)
	}
	g.put(zeroPad[:padLen(ulen)])
	if g.o == g.next {
		g.marker(uint16(g.o - g.hdr))
	}
	var crc uint32
	if folded {
		crc = sum
	} else if f.crc {
		crc = g.sum
	}
	g.side = binary.LittleEndian.AppendUint32(g.side, crc)
	g.iov = append(g.iov, g.side[len(g.side)-crcLen:])
	f.pos += uint64(wire)
	f.stats.FPDUs++
	f.stats.Markers += uint64(count)
	f.stats.Bytes += uint64(wire)
	return g.iov, g.side
}

// gatherer builds GatherFPDU's iovecs, running the CRC as it goes.
type gatherer struct {
	iov     [][]byte
	side    []byte
	o       int // wire offset in the FPDU
	next    int // offset of the next marker
	hdr     int
	spacing int
	crc     bool
	sum     uint32
}

func (g *gatherer) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	g.iov = append(g.iov, b)
	if g.crc {
		g.sum = UpdateCRC32C(g.sum, b)
	}
	g.o += len(b)
}

func (g *gatherer) marker(fpduptr uint16) {
	g.side = append(g.side, 0, 0, byte(fpduptr>>8), byte(fpduptr))
	g.emit(g.side[len(g.side)-MarkerLen:])
}

func (g *gatherer) put(src []byte) {
	for len(src) > 0 {
		if g.o == g.next {
			g.marker(uint16(g.o - g.hdr))
			g.next += g.spacing
		}
		n := min(len(src), g.next-g.o)
		g.emit(src[:n])
		src = src[n:]
	}
}
