package iwarp

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestTxStrategiesAgree: in place, gather and copy put the same octets on
// the wire for the same ULPDU at the same position, in every framing mode,
// at random positions and lengths (so every marker phase, leading markers
// and markers right before the CRC all occur).
func TestTxStrategiesAgree(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, fc := range deframerModes {
		for _, spacing := range []int{512, 64} {
			cp := NewTxFramer(fc.markers, fc.crc, spacing)
			ip := NewTxFramer(fc.markers, fc.crc, spacing)
			ga := NewTxFramer(fc.markers, fc.crc, spacing)
			var pieces, iov [][]byte
			var side, buf []byte
			for i := 0; i < 3000; i++ {
				n := r.Intn(8000) // both sides of encodeFoldMin+512, where AppendFPDU starts to fold
				if i%100 == 0 {
					n = r.Intn(cp.MaxULPDU() + 1)
				}
				data := randBytes(r, n)
				cut := r.Intn(n + 1)
				want := cp.AppendFPDU(nil, data[:cut], data[cut:])

				var res Reserved
				buf, res = ip.ReserveFPDU(buf[:0], n, pieces)
				rest := data
				for _, p := range res.Pieces {
					rest = rest[copy(p, rest):]
				}
				if len(rest) != 0 {
					t.Fatalf("pieces hold %d octets too few", len(rest))
				}
				pieces = res.Pieces
				ip.SealFPDU(res)
				if !bytes.Equal(buf, want) {
					t.Fatalf("in place, %d octets at %d (markers %t, spacing %d):\n% x\nwant\n% x", n, ip.Pos(), fc.markers, spacing, buf, want)
				}

				iov, side = ga.GatherFPDU(iov[:0], side[:0], data[:cut], data[cut:])
				if got := bytes.Join(iov, nil); !bytes.Equal(got, want) {
					t.Fatalf("gather, %d octets (markers %t, spacing %d):\n% x\nwant\n% x", n, fc.markers, spacing, got, want)
				}
				if ip.Pos() != cp.Pos() || ga.Pos() != cp.Pos() {
					t.Fatalf("positions %d %d %d", cp.Pos(), ip.Pos(), ga.Pos())
				}
			}
			if ip.Stats() != cp.Stats() || ga.Stats() != cp.Stats() {
				t.Fatalf("stats %+v %+v %+v", cp.Stats(), ip.Stats(), ga.Stats())
			}
		}
	}
}
