package iwarp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// RFC 5044 §4.4, Fig.5 and Fig.6: a 42-octet untagged Send ULPDU
// (DDP control 0x41: L=1, DV=1; RDMAP control 0x43: RV=1, Send; QN 0; MSN 1
// and 2; MO 0; 24 octets of zero payload).
func rfcULPDU(msn byte) []byte {
	u := []byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, msn, 0, 0, 0, 0}
	return append(u, make([]byte, 24)...)
}

// Fig.5: the first FPDU of a stream with markers, which starts with the
// marker at stream offset 0. The CRC covers that marker.
func rfcFig5() []byte {
	b := []byte{0, 0, 0, 0, 0x00, 0x2a}
	b = append(b, rfcULPDU(1)...)
	return append(b, 0x52, 0x23, 0x99, 0x83)
}

// Fig.6: an FPDU at stream offset 0x1EC; the marker at 0x200 falls 20 octets
// in, after ULPDU_Length and the 18-octet DDP header.
const rfcFig6Pos = 0x1EC

func rfcFig6() []byte {
	u := rfcULPDU(2)
	b := []byte{0x00, 0x2a}
	b = append(b, u[:18]...)
	b = append(b, 0, 0, 0, 0x14)
	b = append(b, u[18:]...)
	return append(b, 0x84, 0x92, 0x58, 0x98)
}

func TestRFC5044Fig5Fig6Tx(t *testing.T) {
	tx := NewTxFramer(true, true, DefaultMarkerSpacing)
	if n := tx.WireLen(42); n != 52 {
		t.Fatalf("WireLen(42) at 0 = %d, want 52", n)
	}
	got := tx.AppendFPDU(nil, rfcULPDU(1)[:2], rfcULPDU(1)[2:])
	if want := rfcFig5(); !bytes.Equal(got, want) {
		t.Fatalf("Fig.5:\n got % x\nwant % x", got, want)
	}
	if tx.Pos() != 52 {
		t.Fatalf("Pos after Fig.5 = %d", tx.Pos())
	}

	if err := tx.SetPos(rfcFig6Pos); err != nil {
		t.Fatal(err)
	}
	got = tx.AppendFPDU(nil, rfcULPDU(2))
	if want := rfcFig6(); !bytes.Equal(got, want) {
		t.Fatalf("Fig.6:\n got % x\nwant % x", got, want)
	}
	if s := tx.Stats(); s.FPDUs != 2 || s.Markers != 2 || s.Bytes != 104 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRFC5044Fig5Fig6Rx(t *testing.T) {
	for _, tc := range []struct {
		name string
		pos  uint64
		wire []byte
		msn  byte
	}{{"Fig.5", 0, rfcFig5(), 1}, {"Fig.6", rfcFig6Pos, rfcFig6(), 2}} {
		rx := NewRxDeframer(true, true, 0)
		if err := rx.SetPos(tc.pos); err != nil {
			t.Fatal(err)
		}
		buf := append(tc.wire, 0xEE, 0xEE) // trailing octets are left alone
		if n, err := rx.FrameLen(buf); err != nil || n != 52 {
			t.Fatalf("%s: FrameLen = %d, %v", tc.name, n, err)
		}
		u, n, err := rx.Next(buf)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n != 52 || !bytes.Equal(u, rfcULPDU(tc.msn)) {
			t.Fatalf("%s: n=%d ulpdu % x", tc.name, n, u)
		}
		if rx.Pos() != tc.pos+52 {
			t.Fatalf("%s: pos %d", tc.name, rx.Pos())
		}
		seg, err := ParseDDPSegment(u)
		if err != nil || seg.Opcode() != OpSend || seg.MSN != uint32(tc.msn) || !seg.Last || len(seg.Payload) != 24 {
			t.Fatalf("%s: DDP %+v %v", tc.name, seg, err)
		}
		if s := rx.Stats(); s.FPDUs != 1 || s.Markers != 1 || s.Bytes != 52 || s.CRCBytes != 48 || s.CRCErrors != 0 {
			t.Fatalf("%s: stats %+v", tc.name, s)
		}
	}
}

// naiveDeframe is an independent model of the receive side: it strips a
// marker from every stream position that is a multiple of spacing, then
// reads FPDUs from the unmarked stream, checking each marker against the
// FPDU its insertion point falls in and the CRC over the wire octets.
func naiveDeframe(wire []byte, pos0 uint64, spacing int, markers, crc bool) ([][]byte, error) {
	type mk struct {
		wirePos uint64 // stream position of the marker
		at      int    // insertion point in the unmarked stream
		val     uint32
	}
	var plain []byte
	var marks []mk
	wirePosOf := []uint64{} // stream position of each plain octet
	for i := 0; i < len(wire); {
		p := pos0 + uint64(i)
		if markers && p%uint64(spacing) == 0 {
			if i+4 > len(wire) {
				return nil, fmt.Errorf("truncated marker")
			}
			marks = append(marks, mk{p, len(plain), binary.BigEndian.Uint32(wire[i:])})
			i += 4
			continue
		}
		plain = append(plain, wire[i])
		wirePosOf = append(wirePosOf, p)
		i++
	}
	var out [][]byte
	mi := 0
	for u := 0; u < len(plain); {
		if u+2 > len(plain) {
			return nil, fmt.Errorf("truncated header")
		}
		l := int(binary.BigEndian.Uint16(plain[u:]))
		c := (2 + l + 3) &^ 3
		if u+c+4 > len(plain) {
			return nil, fmt.Errorf("truncated FPDU")
		}
		hdrPos := wirePosOf[u]
		start := hdrPos
		for ; mi < len(marks) && marks[mi].at <= u+c; mi++ {
			m := marks[mi]
			want := uint32(m.wirePos - hdrPos)
			if m.at == u {
				want = 0
				start = m.wirePos
			}
			if m.val != want {
				return nil, fmt.Errorf("marker at %d = %#x, want %#x", m.wirePos, m.val, want)
			}
		}
		if crc {
			endPos := wirePosOf[u+c] // first CRC octet
			covered := wire[start-pos0 : endPos-pos0]
			if got, want := binary.LittleEndian.Uint32(plain[u+c:]), CRC32C(covered); got != want {
				return nil, fmt.Errorf("CRC %#x, want %#x", got, want)
			}
		} else if binary.LittleEndian.Uint32(plain[u+c:]) != 0 {
			return nil, fmt.Errorf("CRC field not zero with CRC off")
		}
		out = append(out, plain[u+2:u+2+l])
		u += c + 4
	}
	return out, nil
}

type framingCase struct {
	markers, crc bool
	spacing      int
}

func (c framingCase) String() string {
	return fmt.Sprintf("markers=%t/crc=%t/spacing=%d", c.markers, c.crc, c.spacing)
}

func framingCases() []framingCase {
	var cs []framingCase
	for _, s := range []int{512, 1024, 64, 16} {
		for _, m := range []bool{true, false} {
			for _, c := range []bool{true, false} {
				if !m && s != 512 {
					continue // spacing is irrelevant without markers
				}
				cs = append(cs, framingCase{m, c, s})
			}
		}
	}
	return cs
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

// randSize favours the interesting small and boundary sizes but covers the
// whole range.
func randSize(r *rand.Rand, max int) int {
	switch r.Intn(4) {
	case 0:
		return r.Intn(64)
	case 1:
		return r.Intn(2048)
	case 2:
		return max - r.Intn(8)
	}
	return r.Intn(max + 1)
}

func TestTxMatchesNaiveModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, fc := range framingCases() {
		for i := 0; i < 60; i++ {
			tx := NewTxFramer(fc.markers, fc.crc, fc.spacing)
			pos := uint64(r.Intn(1<<20)) &^ 3
			if i%7 == 0 {
				pos = uint64(fc.spacing * r.Intn(100)) // start on a marker
			}
			if err := tx.SetPos(pos); err != nil {
				t.Fatal(err)
			}
			u := randBytes(r, randSize(r, tx.MaxULPDU()))
			want := tx.WireLen(len(u))
			wire := tx.AppendFPDU(nil, u)
			if len(wire) != want || tx.Pos() != pos+uint64(want) {
				t.Fatalf("%v: len %d: wire %d, WireLen %d, pos %d", fc, len(u), len(wire), want, tx.Pos())
			}
			got, err := naiveDeframe(wire, pos, fc.spacing, fc.markers, fc.crc)
			if err != nil {
				t.Fatalf("%v: pos %d len %d: %v", fc, pos, len(u), err)
			}
			if len(got) != 1 || !bytes.Equal(got[0], u) {
				t.Fatalf("%v: pos %d len %d: model recovered a different ULPDU", fc, pos, len(u))
			}
			// Every marker sits on a multiple of the spacing: count them.
			if fc.markers {
				n := uint64(0)
				for p := pos; p < pos+uint64(len(wire))-4; p++ {
					if p%uint64(fc.spacing) == 0 {
						n++
					}
				}
				if tx.Stats().Markers != n {
					t.Fatalf("%v: %d markers counted, %d positions", fc, tx.Stats().Markers, n)
				}
			}
		}
	}
}

// roundTrip frames ULPDUs into one stream and feeds it to an RxDeframer in
// random-sized chunks, always from the first unconsumed octet, as a caller
// with a growing buffer does.
func roundTrip(t *testing.T, r *rand.Rand, fc framingCase, pos uint64, ulpdus [][]byte) {
	t.Helper()
	tx := NewTxFramer(fc.markers, fc.crc, fc.spacing)
	rx := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
	if err := tx.SetPos(pos); err != nil {
		t.Fatal(err)
	}
	if err := rx.SetPos(pos); err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for _, u := range ulpdus {
		// Split each ULPDU into up to three parts.
		a := r.Intn(len(u) + 1)
		b := a + r.Intn(len(u)-a+1)
		stream = tx.AppendFPDU(stream, u[:a], u[a:b], u[b:])
	}
	if tx.Pos() != pos+uint64(len(stream)) {
		t.Fatalf("tx pos %d, stream %d", tx.Pos(), len(stream))
	}
	buf := append([]byte(nil), stream...)
	consumed, avail, next := 0, 0, 0
	for next < len(ulpdus) {
		if avail < len(buf) {
			avail = min(len(buf), avail+1+r.Intn(3000))
		}
		view := buf[consumed:avail]
		saved := append([]byte(nil), view...)
		u, n, err := rx.Next(view)
		if errors.Is(err, ErrNeedMore) {
			if avail == len(buf) {
				t.Fatalf("%v: ErrNeedMore with the whole stream present", fc)
			}
			if !bytes.Equal(saved, view) || rx.Pos() != pos+uint64(consumed) {
				t.Fatalf("%v: ErrNeedMore changed the buffer or the position", fc)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: FPDU %d: %v", fc, next, err)
		}
		if !bytes.Equal(u, ulpdus[next]) {
			t.Fatalf("%v: FPDU %d: ULPDU differs (len %d vs %d)", fc, next, len(u), len(ulpdus[next]))
		}
		if len(u) > 0 && uintptrDiff(u, view) < 0 {
			t.Fatalf("ULPDU does not alias buf")
		}
		consumed += n
		next++
	}
	if consumed != len(stream) || rx.Pos() != tx.Pos() {
		t.Fatalf("%v: consumed %d of %d, rx pos %d, tx pos %d", fc, consumed, len(stream), rx.Pos(), tx.Pos())
	}
	ts, rs := tx.Stats(), rx.Stats()
	if ts.FPDUs != rs.FPDUs || ts.Markers != rs.Markers || ts.Bytes != rs.Bytes || rs.CRCErrors != 0 {
		t.Fatalf("%v: tx %+v rx %+v", fc, ts, rs)
	}
}

// uintptrDiff is the offset of sub inside buf, found by search, so the test
// does not need package unsafe.
func uintptrDiff(sub, buf []byte) int {
	for i := range buf {
		if &buf[i] == &sub[0] {
			return i
		}
	}
	return -1
}

func TestRoundTripRandomChunks(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, fc := range framingCases() {
		for trial := 0; trial < 6; trial++ {
			max := NewTxFramer(fc.markers, fc.crc, fc.spacing).MaxULPDU()
			var ulpdus [][]byte
			total := 0
			for total < 300000 && len(ulpdus) < 200 {
				n := randSize(r, max)
				if trial%2 == 0 {
					n = r.Intn(1500) // many small FPDUs: exercises phases
				}
				ulpdus = append(ulpdus, randBytes(r, n))
				total += n
			}
			pos := uint64(r.Intn(1<<16)) &^ 3
			if trial == 0 {
				pos = 0
			}
			roundTrip(t, r, fc, pos, ulpdus)
		}
	}
}

func TestAllSizesAndPhasesSmallSpacing(t *testing.T) {
	// With spacing 16 a marker falls every 12 content octets, so sizes 0..200
	// at every phase hit each placement: leading, interior, before the CRC.
	r := rand.New(rand.NewSource(3))
	for _, crc := range []bool{true, false} {
		for phase := 0; phase < 16; phase += 4 {
			var ulpdus [][]byte
			for n := 0; n <= 200; n++ {
				ulpdus = append(ulpdus, randBytes(r, n))
			}
			roundTrip(t, r, framingCase{true, crc, 16}, uint64(16*5+phase), ulpdus)
		}
	}
}

func TestMaxULPDU(t *testing.T) {
	if got := NewTxFramer(false, true, 0).MaxULPDU(); got != 65535 {
		t.Fatalf("no markers: MaxULPDU %d", got)
	}
	if got := NewTxFramer(true, true, 512).MaxULPDU(); got != 65022 {
		t.Fatalf("spacing 512: MaxULPDU %d, want 65022", got)
	}
	// maxFPDUPTR against brute force over every phase.
	r := rand.New(rand.NewSource(4))
	for _, s := range []int{16, 20, 64, 512, 1024, 4096} {
		for i := 0; i < 300; i++ {
			content := (r.Intn(70000) + 4) &^ 3
			worst := 0
			for phase := 0; phase < s; phase += 4 {
				first, count := markerLayout(phase, content, s)
				hdr := 0
				if count > 0 && first == 0 {
					hdr = 4
				}
				if count > 0 {
					worst = max(worst, first+(count-1)*s-hdr)
				}
			}
			if got := maxFPDUPTR(content, s); got != worst && !(worst == 0 && got < 0) {
				t.Fatalf("spacing %d content %d: maxFPDUPTR %d, brute force %d", s, content, got, worst)
			}
		}
	}
	// MaxULPDU works at every phase, and one more octet overflows FPDUPTR at some phase.
	for _, s := range []int{16, 64, 512, 1024} {
		tx := NewTxFramer(true, true, s)
		m := tx.MaxULPDU()
		u := make([]byte, m)
		for phase := 0; phase < s; phase += 4 {
			tx := NewTxFramer(true, true, s)
			tx.SetPos(uint64(s*3 + phase))
			w := tx.AppendFPDU(nil, u)
			if _, err := naiveDeframe(w, uint64(s*3+phase), s, true, true); err != nil {
				t.Fatalf("spacing %d phase %d at MaxULPDU %d: %v", s, phase, m, err)
			}
		}
		if m < 65535 && maxFPDUPTR(((2+m+3)&^3)+4, s) <= 0xFFFC {
			t.Fatalf("spacing %d: MaxULPDU %d is not the largest", s, m)
		}
		if got := tx.AppendFPDU([]byte{1}, make([]byte, m+1)); m < 65535 && (len(got) != 1 || tx.Pos() != 0) {
			t.Fatalf("spacing %d: over-long ULPDU was framed", s)
		}
	}
}

func TestMULPDU(t *testing.T) {
	for _, tt := range []struct {
		emss    int
		markers bool
		want    int
	}{
		{1448, true, 1430}, {1448, false, 1442},
		{1460, true, 1442}, {1460, false, 1454},
		{1, true, 128}, {100, false, 128}, {0, false, 128},
		{9000, false, 8994}, {65483, false, 65474}, {65483, true, 64962}, {66000, true, 65022},
		{1 << 20, false, 65535},
	} {
		if got := MULPDU(tt.emss, tt.markers); got != tt.want {
			t.Errorf("MULPDU(%d, %t) = %d, want %d", tt.emss, tt.markers, got, tt.want)
		}
	}
	// An FPDU of MULPDU octets fits the segment wherever it starts.
	for _, s := range []int{512, 64, 1024} {
		for emss := 200; emss < 66000; emss += 97 {
			tx := NewTxFramer(true, true, s)
			m := tx.MULPDU(emss)
			if m == tx.MaxULPDU() {
				continue
			}
			for phase := 0; phase < s; phase += 4 {
				tx.SetPos(uint64(phase))
				if w := tx.WireLen(m); w > emss {
					t.Fatalf("spacing %d emss %d phase %d: MULPDU %d needs %d octets", s, emss, phase, m, w)
				}
			}
		}
	}
}

func TestZeroLengthULPDU(t *testing.T) {
	for _, fc := range framingCases() {
		tx := NewTxFramer(fc.markers, fc.crc, fc.spacing)
		rx := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
		w := tx.AppendFPDU(nil)
		u, n, err := rx.Next(w)
		if err != nil || n != len(w) || len(u) != 0 {
			t.Fatalf("%v: % x: %v", fc, w, err)
		}
	}
}

func TestPrefixNeedsMore(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, fc := range framingCases() {
		tx := NewTxFramer(fc.markers, fc.crc, fc.spacing)
		tx.SetPos(uint64(fc.spacing * 2))
		w := tx.AppendFPDU(nil, randBytes(r, 3000))
		rx := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
		rx.SetPos(uint64(fc.spacing * 2))
		for k := 0; k < len(w); k += 1 + k/8 {
			p := append([]byte(nil), w[:k]...)
			if _, n, err := rx.Next(p); !errors.Is(err, ErrNeedMore) || n != 0 || !bytes.Equal(p, w[:k]) {
				t.Fatalf("%v: prefix %d: n=%d err=%v", fc, k, n, err)
			}
		}
		if rx.Pos() != uint64(fc.spacing*2) || rx.Stats() != (RxStats{}) {
			t.Fatalf("%v: state changed by prefixes", fc)
		}
	}
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %v", err)
	}
	return e
}

func TestCorruptionRejected(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	for _, s := range []int{512, 64} {
		for _, size := range []int{0, 1, 42, 500, 1500, 9000} {
			pos := uint64(r.Intn(4096)) &^ 3
			tx := NewTxFramer(true, true, s)
			tx.SetPos(pos)
			w := tx.AppendFPDU(nil, randBytes(r, size))
			// Trailing octets so that a longer ULPDU_Length still ends inside
			// the buffer and fails its checks instead of waiting for more.
			tail := make([]byte, 70000)
			bits := len(w) * 8
			for i := 0; i < 400; i++ {
				bit := r.Intn(bits)
				if i < bits && i < 64 {
					bit = i // always cover the first octets (leading marker, length)
				}
				buf := append(append([]byte(nil), w...), tail...)
				buf[bit/8] ^= 1 << (bit % 8)
				rx := NewRxDeframer(true, true, s)
				rx.SetPos(pos)
				_, _, err := rx.Next(buf)
				e := asError(t, err)
				if e.Layer != LayerMPA || (e.Code != MPAErrCRC && e.Code != MPAErrMarker) {
					t.Fatalf("bit %d: %v", bit, e)
				}
				if rx.Pos() != pos {
					t.Fatalf("position moved on error")
				}
			}
		}
	}
}

func TestBadCRCMessage(t *testing.T) {
	w := rfcFig5()
	w[len(w)-1] ^= 0xFF
	rx := NewRxDeframer(true, true, 0)
	_, _, err := rx.Next(w)
	e := asError(t, err)
	if e.Code != MPAErrCRC || !errors.Is(err, &Error{Layer: LayerMPA, Code: MPAErrCRC}) {
		t.Fatalf("%v", e)
	}
	want := "iwarp: MPA: bad CRC (got 0x7c992352, want 0x83992352)"
	if got := e.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("message %q, want prefix %q", got, want)
	}
	if rx.Stats().CRCErrors != 1 {
		t.Fatalf("CRCErrors not counted")
	}
}

func TestWrongFPDUPTRRejected(t *testing.T) {
	for _, crc := range []bool{true, false} {
		tx := NewTxFramer(true, crc, 512)
		tx.SetPos(rfcFig6Pos)
		w := tx.AppendFPDU(nil, rfcULPDU(2))
		w[23] = 0x18 // FPDUPTR 0x14 -> 0x18
		if crc {
			binary.LittleEndian.PutUint32(w[len(w)-4:], CRC32C(w[:len(w)-4]))
		}
		rx := NewRxDeframer(true, crc, 512)
		rx.SetPos(rfcFig6Pos)
		_, _, err := rx.Next(w)
		if e := asError(t, err); e.Code != MPAErrMarker {
			t.Fatalf("crc=%t: %v", crc, e)
		}
		// A nonzero reserved half is rejected too.
		w[23], w[20] = 0x14, 0x80
		if crc {
			binary.LittleEndian.PutUint32(w[len(w)-4:], CRC32C(w[:len(w)-4]))
		}
		if _, _, err := rx.Next(w); asError(t, err).Code != MPAErrMarker {
			t.Fatalf("reserved half accepted")
		}
	}
	// A bad leading marker is rejected as soon as it arrives.
	rx := NewRxDeframer(true, true, 512)
	if _, _, err := rx.Next([]byte{0, 0, 0, 4}); asError(t, err).Code != MPAErrMarker {
		t.Fatalf("bad leading marker not rejected early")
	}
}

func TestSetMaxULPDU(t *testing.T) {
	tx := NewTxFramer(false, true, 0)
	w := tx.AppendFPDU(nil, make([]byte, 5000))
	rx := NewRxDeframer(false, true, 0)
	rx.SetMaxULPDU(4096)
	if _, err := rx.FrameLen(w[:2]); asError(t, err).Layer != LayerMPA {
		t.Fatalf("over-long ULPDU_Length not rejected from its header")
	}
	rx.SetMaxULPDU(5000)
	if _, _, err := rx.Next(w); err != nil {
		t.Fatal(err)
	}
}

func TestSetPosAlignment(t *testing.T) {
	if NewTxFramer(true, true, 0).SetPos(6) == nil || NewRxDeframer(true, true, 0).SetPos(2) == nil {
		t.Fatal("unaligned position accepted")
	}
}

func TestSpacingNormalisation(t *testing.T) {
	for in, want := range map[int]int{0: 512, 512: 512, 1024: 1024, 1: 16, 515: 512, 1 << 20: 65536, -8: 16} {
		if got := NewTxFramer(true, true, in).Spacing(); got != want {
			t.Errorf("spacing %d -> %d, want %d", in, got, want)
		}
	}
	for s, ok := range map[int]bool{0: true, 512: true, 16: true, 65536: true, 12: false, 514: false, 65540: false} {
		if (ValidMarkerSpacing(s) == nil) != ok {
			t.Errorf("ValidMarkerSpacing(%d) ok=%t", s, !ok)
		}
	}
}

func TestFramingDoesNotAllocate(t *testing.T) {
	payload := make([]byte, 16384)
	tx := NewTxFramer(true, true, 512)
	dst := make([]byte, 0, 2*tx.WireLen(len(payload))+1024)
	hdr := make([]byte, DDPUntaggedHeaderLen)
	if n := testing.AllocsPerRun(100, func() {
		dst = tx.AppendFPDU(dst[:0], hdr, payload)
	}); n != 0 {
		t.Fatalf("AppendFPDU: %v allocs", n)
	}
	tx2 := NewTxFramer(true, true, 512)
	wire := tx2.AppendFPDU(nil, hdr, payload)
	buf := make([]byte, len(wire))
	rx := NewRxDeframer(true, true, 512)
	if n := testing.AllocsPerRun(100, func() {
		copy(buf, wire)
		rx.SetPos(0)
		if _, _, err := rx.Next(buf); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Fatalf("Next: %v allocs", n)
	}
}

// TestGatherMatchesNext: gather takes any window of an FPDU's ULPDU out of
// its wire form, over the markers, exactly as Next's compaction leaves it;
// at every marker phase, spacings 16 and 512, sizes that put markers before,
// inside and after the window.
func TestGatherMatchesNext(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, spacing := range []int{16, 512} {
		for phase := 0; phase < spacing; phase += 4 * max(1, spacing/64) {
			for _, n := range []int{0, 1, 17, 40, 100, 511, 1430, 4096, 9000} {
				pos := uint64(spacing*3 + phase)
				tx := NewTxFramer(true, true, spacing)
				rx := NewRxDeframer(true, true, spacing)
				if err := tx.SetPos(pos); err != nil {
					t.Fatal(err)
				}
				if err := rx.SetPos(pos); err != nil {
					t.Fatal(err)
				}
				u := randBytes(r, n)
				fr := tx.AppendFPDU(nil, u)
				hdr, ulen, first, wire, err := rx.header(fr)
				if err != nil || wire != len(fr) || ulen != n {
					t.Fatalf("spacing %d phase %d n %d: header %d %d %v", spacing, phase, n, ulen, wire, err)
				}
				for range 8 {
					from := r.Intn(n + 1)
					dst := make([]byte, r.Intn(n-from+1))
					rx.gather(dst, fr, hdr, first, ulen, from)
					if !bytes.Equal(dst, u[from:from+len(dst)]) {
						t.Fatalf("spacing %d phase %d n %d: gather [%d, %d) differs", spacing, phase, n, from, from+len(dst))
					}
				}
				got, _, err := rx.Next(append([]byte(nil), fr...))
				if err != nil || !bytes.Equal(got, u) {
					t.Fatalf("spacing %d phase %d n %d: Next %v", spacing, phase, n, err)
				}
			}
		}
	}
}
