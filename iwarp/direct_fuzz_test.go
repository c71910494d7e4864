package iwarp

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// directRun feeds wire to a QP in Full Operation over a socketpair: the
// first cut octets, one Fill and a NextSegment (so the next Fill may place
// directly), then the rest. It returns the region, the completions and the
// fault, if any, and the range [lo, hi) of the region a direct placement
// last wrote (0, 0 for none) and whether an FPDU was left incomplete.
//
// reads lists the Read Requests (size, sink TO) posted first, whose Read
// Responses the wire may carry.
func directRun(t *testing.T, wire []byte, cut int, mode framingCase, direct bool, reads [][2]int) (region []byte, comps []Completion, fault error, lo, hi int, partial bool) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	// Room for the whole input, so that writing it never waits.
	for _, fd := range fds {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	q := NewQP(fds[1])
	q.SetDirectPlacement(direct)
	q.SetRemoteEvents(true)
	q.StartFullOperation(mode.markers, mode.markers, mode.crc, mode.spacing, 65535)
	region = make([]byte, 70000)
	for i := range region {
		region[i] = byte(i * 3)
	}
	// The seeds name STag 0x1A5: slot 1 with key 0xA5, which the region
	// gets here in place of a random key, so both runs see the same STag.
	if _, err := q.Register(region, AccessRemoteWrite|AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	q.mem.regions[0].key = 0xA5
	for _, r := range reads {
		if _, err := q.PostReadRequest(ReadRequest{SinkSTag: 0x1A5, SinkTO: uint64(r[1]), Size: uint32(r[0]), SrcSTag: 7}); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		for fault == nil {
			seg, err := q.NextSegment()
			if err == ErrNeedMore {
				return
			}
			if err != nil {
				fault = err
				return
			}
			seg.Release()
		}
	}
	for _, part := range [][]byte{wire[:cut], wire[cut:]} {
		if len(part) > 0 {
			if _, err := unix.Write(fds[0], part); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 64 && fault == nil; i++ {
			if _, err := q.Fill(); err != nil {
				break
			}
			drain()
		}
	}
	drain()
	if p := q.direct.seg.Payload; p != nil {
		lo = int(q.direct.seg.TO)
		hi = lo + len(p)
	}
	return region, q.PollCompletions(nil), fault, lo, hi, q.direct.active || q.Buffered() > 0
}

// FuzzDirectPlacement checks direct placement against the staged path on
// the same octets, cut at the same point: the same fault (layer, type,
// code) or none, the same completions, and, when every FPDU arrived whole
// and none failed, the same region. A fault or an FPDU still arriving may
// leave the checked range of a direct placement changed (its octets are
// undefined until it completes), but never any octet outside it.
//
// The input is small, so that the fuzzer minimises it quickly: a payload
// length, a framing mode, the cut, extra FPDUs, and a list of edits (2
// octets of wire offset, 1 octet XORed there) applied to the valid stream.
func FuzzDirectPlacement(f *testing.F) {
	f.Add(uint16(3000), uint8(0), uint16(30), uint8(0), []byte{})
	f.Add(uint16(9000), uint8(1), uint16(515), uint8(1), []byte{})
	f.Add(uint16(9000), uint8(0), uint16(100), uint8(0), []byte{0x10, 0x00, 0x01})   // payload octet
	f.Add(uint16(9000), uint8(0), uint16(100), uint8(0), []byte{0x04, 0x03, 0x04})   // marker at 1024
	f.Add(uint16(5000), uint8(2), uint16(24), uint8(0), []byte{0x00, 0x0b, 0xff})    // TO
	f.Add(uint16(5000), uint8(3), uint16(40), uint8(0), []byte{0x00, 0x07, 0x01})    // STag
	f.Add(uint16(2100), uint8(0), uint16(600), uint8(2), []byte{0x00, 0x05, 0x01})   // ULPDU_Length
	f.Add(uint16(9000), uint8(2), uint16(300), uint8(0), []byte{0x23, 0x3c, 0x80})   // CRC
	f.Add(uint16(7000), uint8(0), uint16(50), uint8(0x80), []byte{})                 // Read Response
	f.Add(uint16(7000), uint8(1), uint16(50), uint8(0x81), []byte{0x00, 0x0b, 0x04}) // ... at the wrong TO
	f.Fuzz(func(t *testing.T, n uint16, mode uint8, cut uint16, more uint8, edits []byte) {
		m := deframerModes[mode%4]
		size := 2048 + int(n)%20000
		tx := NewTxFramer(m.markers, m.crc, m.spacing)
		var h [DDPTaggedHeaderLen]byte
		// more's top bit makes the first FPDU a Read Response to a Read
		// Request posted before it arrives.
		op := OpRDMAWrite
		var reads [][2]int
		if more&0x80 != 0 {
			op = OpReadResponse
			reads = append(reads, [2]int{size, 100})
		}
		EncodeTaggedHeader(h[:], true, RDMAPCtrl(op), 0x1A5, 100)
		wire := tx.AppendFPDU(nil, h[:], pattern(size, byte(n)))
		for i := 0; i < int(more%4); i++ {
			EncodeTaggedHeader(h[:], i%2 == 1, RDMAPCtrl(OpRDMAWrite), 0x1A5, uint64(40000+i*3000))
			wire = tx.AppendFPDU(wire, h[:], pattern(3000, byte(i)))
		}
		for len(edits) >= 3 {
			if o := int(edits[0])<<8 | int(edits[1]); o < len(wire) {
				wire[o] ^= edits[2]
			}
			edits = edits[3:]
		}
		c := min(int(cut), len(wire))
		r1, c1, e1, lo, hi, partial := directRun(t, wire, c, m, true, reads)
		r2, c2, e2, _, _, _ := directRun(t, wire, c, m, false, reads)
		var x1, x2 *Error
		if (e1 == nil) != (e2 == nil) || (e1 != nil && (!errors.As(e1, &x1) || !errors.As(e2, &x2) || !errors.Is(x1, x2))) {
			t.Fatalf("direct: %v; staged: %v", e1, e2)
		}
		if len(c1) != len(c2) {
			t.Fatalf("completions: direct %v, staged %v", c1, c2)
		}
		for i := range c1 {
			if c1[i] != c2[i] {
				t.Fatalf("completions: direct %v, staged %v", c1, c2)
			}
		}
		if string(r1[:lo]) != string(r2[:lo]) || string(r1[hi:]) != string(r2[hi:]) {
			t.Fatalf("direct placement changed octets outside [%d, %d): %v / %v, %v / %v", lo, hi, e1, e2, c1, c2)
		}
		if e1 == nil && !partial && string(r1) != string(r2) {
			t.Fatalf("regions differ after whole FPDUs without a fault")
		}
	})
}
