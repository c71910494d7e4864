package iwarp

import (
	"encoding/binary"
	"math/rand"
	"testing"
)

// Property: for random message sizes, cut into FPDUs as a QP cuts them,
// and random stream start positions, every octet at a stream offset that
// is a multiple of the spacing begins a marker, whose FPDUPTR is 0 when it
// opens an FPDU and otherwise the distance back to that FPDU's
// ULPDU_Length (RFC 5044 §4.3); no marker is anywhere else, and the
// receiver recovers every ULPDU. Each framing strategy is checked.
func TestMarkersLandWhereRFC5044Says(t *testing.T) {
	r := rand.New(rand.NewSource(5044))
	for trial := 0; trial < 300; trial++ {
		spacing := DefaultMarkerSpacing
		if trial%5 == 4 {
			spacing = []int{16, 64, 1024, 4096}[r.Intn(4)]
		}
		pos := uint64(r.Int63n(1<<40)) &^ 3
		if trial%4 == 0 {
			pos = uint64(spacing) * uint64(r.Intn(1000)) // start on a marker
		} else if trial%4 == 1 {
			pos = uint64(spacing)*uint64(1+r.Intn(1000)) - 4 // just before one
		}
		strategy := trial % 3
		tx := NewTxFramer(true, trial%2 == 0, spacing)
		if err := tx.SetPos(pos); err != nil {
			t.Fatal(err)
		}
		mulpdu := []int{128, 1430, 9000, tx.MaxULPDU()}[r.Intn(4)]
		var wire []byte
		var starts []uint64
		var ulpdus [][]byte
		for msg := 0; msg < 1+r.Intn(6); msg++ {
			size := randSize(r, 3*mulpdu)
			for off := 0; off == 0 || off < size; {
				n := min(size-off, mulpdu)
				u := randBytes(r, n)
				ulpdus = append(ulpdus, u)
				starts = append(starts, tx.Pos())
				switch strategy {
				case 0:
					wire = tx.AppendFPDU(wire, u)
				case 1:
					var res Reserved
					wire, res = tx.ReserveFPDU(wire, n, nil)
					rest := u
					for _, p := range res.Pieces {
						rest = rest[copy(p, rest):]
					}
					tx.SealFPDU(res)
				case 2:
					iov, _ := tx.GatherFPDU(nil, nil, u)
					for _, v := range iov {
						wire = append(wire, v...)
					}
				}
				off += n
				if n == 0 {
					break
				}
			}
		}
		end := pos + uint64(len(wire))
		if tx.Pos() != end {
			t.Fatalf("trial %d: position %d after %d octets from %d", trial, tx.Pos(), len(wire), pos)
		}
		starts = append(starts, end)
		markers := uint64(0)
		k := 0
		for p := (pos + uint64(spacing) - 1) / uint64(spacing) * uint64(spacing); p < end; p += uint64(spacing) {
			for starts[k+1] <= p {
				k++
			}
			lenAt := starts[k]
			if starts[k]%uint64(spacing) == 0 {
				lenAt += MarkerLen // a leading marker: ULPDU_Length follows it
			}
			want := uint32(0)
			if p != starts[k] {
				want = uint32(p - lenAt)
			}
			if got := binary.BigEndian.Uint32(wire[p-pos:]); got != want {
				t.Fatalf("trial %d (strategy %d, spacing %d, start %d): marker at %d is %#x, want %#x",
					trial, strategy, spacing, pos, p, got, want)
			}
			markers++
		}
		if tx.Stats().Markers != markers {
			t.Fatalf("trial %d: %d markers framed, %d marker positions", trial, tx.Stats().Markers, markers)
		}
		rx := NewRxDeframer(true, trial%2 == 0, spacing)
		if err := rx.SetPos(pos); err != nil {
			t.Fatal(err)
		}
		buf := wire
		for i, want := range ulpdus {
			got, n, err := rx.Next(buf)
			if err != nil || string(got) != string(want) {
				t.Fatalf("trial %d: ULPDU %d: %v", trial, i, err)
			}
			buf = buf[n:]
		}
		if len(buf) != 0 || rx.Stats().Markers != markers {
			t.Fatalf("trial %d: %d octets left, %d markers removed of %d", trial, len(buf), rx.Stats().Markers, markers)
		}
	}
}
