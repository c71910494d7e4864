package iwarp

import (
	"bytes"
	"errors"
	"math/rand"
	"reflect"
	"testing"
)

func FuzzMPAFrame(f *testing.F) {
	f.Add(AppendMPAFrame(nil, &MPAFrame{Markers: true, CRC: true, Rev: 1, PrivateData: []byte("hello")}), false)
	f.Add(AppendMPAFrame(nil, &MPAFrame{Reply: true, Reject: true, Rev: 1}), true)
	f.Add(AppendMPAFrame(nil, &MPAFrame{Reply: true, Enhanced: true, Rev: 2, PrivateData: AppendMPAv2Params(nil, MPAv2Params{IRD: 1, ORD: 1})}), true)
	f.Add([]byte("SSH-2.0-OpenSSH_9.2\r\n"), true)
	f.Add([]byte("MPA ID Rep Frame\x40\x02\x01\x00"), true)
	f.Fuzz(func(t *testing.T, data []byte, wantReply bool) {
		fr, n, err := ParseMPAFrame(data, wantReply)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrNeedMore) && !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if n != 0 {
				t.Fatalf("n=%d with error", n)
			}
			return
		}
		if n < MPAHeaderLen || n > len(data) || fr.Reply != wantReply {
			t.Fatalf("n=%d len=%d", n, len(data))
		}
		if err := fr.Validate(); err != nil {
			t.Fatalf("parsed frame fails Validate: %v", err)
		}
		b := AppendMPAFrame(nil, &fr)
		// Only the reserved flag bits may differ: they are ignored on receipt.
		orig := append([]byte(nil), data[:n]...)
		orig[16] &^= 0x0F
		if !bytes.Equal(b, orig) {
			t.Fatalf("re-encoded\n% x\nfrom\n% x", b, data[:n])
		}
		fr2, n2, err := ParseMPAFrame(b, wantReply)
		if err != nil || n2 != n || !reflect.DeepEqual(fr, fr2) {
			t.Fatalf("re-parse: %+v %d %v", fr2, n2, err)
		}
	})
}

var deframerModes = [4]framingCase{{true, true, 512}, {true, false, 512}, {false, true, 512}, {false, false, 512}}

func FuzzDeframer(f *testing.F) {
	f.Add(rfcFig5(), uint8(0), uint16(0))
	f.Add(rfcFig6(), uint8(0), uint16(rfcFig6Pos/4))
	r := rand.New(rand.NewSource(7))
	for mode, fc := range deframerModes {
		for _, spacing := range []int{512, 64} {
			tx := NewTxFramer(fc.markers, fc.crc, spacing)
			pos := uint16(r.Intn(1 << 12))
			tx.SetPos(uint64(pos) * 4)
			var w []byte
			for i := 0; i < 4; i++ {
				w = tx.AppendFPDU(w, randBytes(r, r.Intn(700)))
			}
			m := uint8(mode)
			if spacing == 64 {
				m |= 4
			}
			f.Add(w, m, pos)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8, pos uint16) {
		fc := deframerModes[mode&3]
		if mode&4 != 0 {
			fc.spacing = 64
		}
		start := uint64(pos) * 4
		rx := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
		rx.SetPos(start)
		buf := append([]byte(nil), data...)
		off := 0
		for off < len(buf) {
			view := buf[off:]
			wire := append([]byte(nil), view...) // before Next closes the gaps
			u, n, err := rx.Next(view)
			if err != nil {
				var e *Error
				if !errors.Is(err, ErrNeedMore) && !errors.As(err, &e) {
					t.Fatalf("error of type %T: %v", err, err)
				}
				if u != nil || n != 0 {
					t.Fatalf("result with error")
				}
				return
			}
			if n <= 0 || n > len(view) || n%4 != 0 || len(u) > n {
				t.Fatalf("n=%d len=%d ulpdu=%d", n, len(view), len(u))
			}
			if len(u) > 0 && uintptrDiff(u, view[:n]) < 0 {
				t.Fatalf("ULPDU outside the consumed octets")
			}
			// gather takes any window of the ULPDU from the wire form as
			// Next's compaction left it.
			rg := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
			rg.SetPos(start + uint64(off))
			if hdr, ulen, first, w, err := rg.header(wire); err != nil || w != n || ulen != len(u) {
				t.Fatalf("header %d %d %v, Next took %d octets, ULPDU %d", w, ulen, err, n, len(u))
			} else {
				from := int(pos) % (ulen + 1)
				g := make([]byte, (ulen-from)/2+int(mode>>3)%(ulen-from+1-(ulen-from)/2))
				rg.gather(g, wire[:n], hdr, first, ulen, from)
				if !bytes.Equal(g, u[from:from+len(g)]) {
					t.Fatalf("gather [%d, %d) of %d differs", from, from+len(g), ulen)
				}
			}
			// The same ULPDU framed afresh has the same wire length and
			// deframes to the same octets.
			tx := NewTxFramer(fc.markers, fc.crc, fc.spacing)
			tx.SetPos(start + uint64(off))
			if len(u) > tx.MaxULPDU() {
				return // valid here, but too long for this Tx's FPDUPTRs at every phase
			}
			if w := tx.WireLen(len(u)); w != n {
				t.Fatalf("wire length %d, Tx would use %d", n, w)
			}
			w := tx.AppendFPDU(nil, u)
			rx2 := NewRxDeframer(fc.markers, fc.crc, fc.spacing)
			rx2.SetPos(start + uint64(off))
			u2, n2, err := rx2.Next(w)
			if err != nil || n2 != n || !bytes.Equal(u, u2) {
				t.Fatalf("re-frame: %v", err)
			}
			off += n
			if rx.Pos() != start+uint64(off) {
				t.Fatalf("pos %d", rx.Pos())
			}
		}
	})
}

func FuzzDDPSegment(f *testing.F) {
	f.Add(rfcULPDU(1))
	for op := Opcode(0); op <= OpImmediateSE; op++ {
		_, b := validSegment(op, true, payloadFor(op))
		f.Add(b)
	}
	f.Add([]byte{0x81, 0x43})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseDDPSegment(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Layer > LayerMPA {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		b := append(s.AppendHeader(nil), s.Payload...)
		if !bytes.Equal(b, data) {
			t.Fatalf("re-encoded\n% x\nfrom\n% x", b, data)
		}
		s2, err := ParseDDPSegment(b)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-parse %+v %v", s2, err)
		}
		if s.Opcode() == OpTerminate {
			ParseTerminate(s.Payload)
		}
		if s.Opcode() == OpReadRequest {
			if _, err := ParseReadRequest(s.Payload); err != nil {
				t.Fatal(err)
			}
		}
	})
}
