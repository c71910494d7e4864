package iwarp

import "hash/crc32"

// crc32cFold512 is in crc_amd64.s.
//
//go:noescape
func crc32cFold512(crc uint32, p []byte) uint32

// foldAVX512 reports whether the CPU and OS support 512-bit carry-less
// multiplication (cpu_amd64.go).
func foldAVX512() bool { return x86().fold }

// foldMin is the shortest input worth the vector setup; below it the
// crc32 instruction (hash/crc32, 22-23 GB/s here) is faster.
// Folding costs about 180 ns a call whatever the length
// (BenchmarkCRC32CFold: 192 ns for 1 KiB, 198 for 1430 octets, 225 for
// 4 KiB, 248 for 6 KiB, 268 for 8 KiB, 355 for 16 KiB, against 46, 80,
// 174, 273, 350 and 707 with the instruction), so it wins from 6 KiB on.
// An FPDU over a 1500-octet MTU is 1448 octets: with folding from 1 KiB,
// its CRC took 2.5 times as long at each end.
const foldMin = 6 << 10

// updateCRC32C continues crc over p: 64-octet blocks by vector folding
// where the CPU has it, the rest with hash/crc32.
func updateCRC32C(crc uint32, p []byte) uint32 {
	if len(p) >= foldMin && foldAVX512() {
		n := len(p) &^ 63
		crc = ^crc32cFold512(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, castagnoli(), p)
}

// crcInstruction reports whether hash/crc32 uses the crc32 instruction for
// the Castagnoli polynomial here (SSE4.2, the test it makes itself).
func crcInstruction() bool { return x86().sse42 }

// crcFolding reports whether updateCRC32C folds with AVX-512.
func crcFolding() bool { return foldAVX512() }

// encodeFold512 is in crc_amd64.s.
//
//go:noescape
func encodeFold512(crc uint32, out, src *byte, groups, toMarker int, fpduptr uint32, spacing int) uint32

// encodeFoldMin is the shortest rest of a ULPDU handed to encodeFold512
// (so AppendFPDU copies and checksums in one pass from a ULPDU of 6 KiB).
// Its fixed cost is folding's (foldMin): BenchmarkFPDUEncode with markers
// and CRC took 333 ns for 2 KiB in one pass and 234 ns as a copy and then
// the crc32 instruction, the same for 4 KiB (361 and 365), and from 6 KiB
// on one pass wins (395 against 471 ns, 8 KiB 424 against 536, 64 KiB
// 2.3 against 4.0 µs).
const encodeFoldMin = 6<<10 - 512

// encodeFolds reports whether AppendFPDU may copy and checksum in one
// pass for this spacing (one marker at most per 64-octet block).
func encodeFolds(spacing int) bool {
	return spacing >= 64 && x86().foldEncode
}

// foldRest copies src into the FPDU after the 256 wire octets w has
// written (w.o is 256), inserting the markers w expects, and returns how many
// octets of src it took and the CRC (standard form) of out[:w.o] after
// it. It leaves at least 512 octets of src to the caller, who ends the
// FPDU with w.put.
func (w *fpduWriter) foldRest(src []byte) (int, uint32) {
	groups := (len(src) - 512) / 256
	toMarker := 1 << 62
	var ptr uint32
	if w.next != noMarker {
		toMarker = w.next - w.o
		ptr = uint32(w.next - w.hdr)
	}
	crc := ^encodeFold512(^uint32(0), &w.out[0], &src[0], groups, toMarker, ptr, w.spacing)
	end := w.o + 256*groups
	used := 256 * groups
	if w.next != noMarker && w.next < end {
		mk := (end-1-w.next)/w.spacing + 1
		used -= MarkerLen * mk
		w.next += mk * w.spacing
	}
	w.o = end
	return used, crc
}

// foldWire512 is in crc_amd64.s.
//
//go:noescape
func foldWire512(crc uint32, out, src *byte, groups, toMarker int, fpduptr uint32, spacing int) uint32

// gatherCRC returns the CRC of the FPDU GatherFPDU describes, computed
// over the caller's parts in place: the first 256 wire octets are built in
// a scratch buffer, the bulk of the last part is folded straight from it
// with its markers (foldWire512), and the tail goes through a gatherer that
// only sums. ok is false when the layout does not suit it.
func (f *TxFramer) gatherCRC(parts [][]byte, ulen, first, count int) (crc uint32, ok bool) {
	if !encodeFolds(f.spacing) || len(parts) == 0 {
		return 0, false
	}
	var head [256]byte
	w := fpduWriter{out: head[:], next: first, spacing: f.spacing}
	if count > 0 && first == 0 {
		EncodeMarker(head[:], 0)
		w.o, w.next = MarkerLen, f.spacing
	}
	w.hdr = w.o
	lenField := [ulpduLenLen]byte{byte(ulen >> 8), byte(ulen)}
	w.putUntil(lenField[:], 256)
	for _, p := range parts[:len(parts)-1] {
		if w.putUntil(p, 256) != len(p) {
			return 0, false
		}
	}
	last := parts[len(parts)-1]
	last = last[w.putUntil(last, 256):]
	if w.o != 256 || len(last) < encodeFoldMin {
		return 0, false
	}
	groups := (len(last) - 512) / 256
	toMarker := 1 << 62
	var ptr uint32
	if w.next != noMarker {
		toMarker = w.next - w.o
		ptr = uint32(w.next - w.hdr)
	}
	crc = ^foldWire512(^uint32(0), &head[0], &last[0], groups, toMarker, ptr, w.spacing)
	end := w.o + 256*groups
	used := 256 * groups
	next := w.next
	if next != noMarker && next < end {
		mk := (end-1-next)/w.spacing + 1
		used -= MarkerLen * mk
		next += mk * w.spacing
	}
	// The tail: the rest of the last part, its markers and the PAD.
	o, sum := end, crc
	mk := f.mk[:] // a field, so that the slice handed to the CRC does not escape
	sumRun := func(b []byte) {
		for len(b) > 0 {
			if o == next {
				EncodeMarker(mk, uint16(o-w.hdr))
				sum = UpdateCRC32C(sum, mk)
				o += MarkerLen
				next += w.spacing
			}
			n := min(len(b), next-o)
			sum = UpdateCRC32C(sum, b[:n])
			o += n
			b = b[n:]
		}
	}
	sumRun(last[used:])
	sumRun(zeroPad[:padLen(ulen)])
	if o == next {
		EncodeMarker(mk, uint16(o-w.hdr))
		sum = UpdateCRC32C(sum, mk)
	}
	return sum, true
}
