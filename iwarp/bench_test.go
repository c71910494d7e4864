package iwarp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// Benchmark sizes are ULPDU lengths. The largest is the longest ULPDU an
// FPDU can carry with markers every 512 octets (MaxULPDU, 65022), standing
// in for 64 KiB, which does not fit one FPDU.
var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"1KiB", 1024}, {"1430B", 1430}, {"2KiB", 2048}, {"4KiB", 4096}, {"6KiB", 6144}, {"8KiB", 8192}, {"16KiB", 16384}, {"64KiB", 65022}}

var benchModes = []struct {
	name         string
	markers, crc bool
}{{"markers+crc", true, true}, {"crc", false, true}, {"none", false, false}}

func BenchmarkFPDUEncode(b *testing.B) {
	for _, m := range benchModes {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", m.name, sz.name), func(b *testing.B) {
				payload := make([]byte, sz.n)
				for i := range payload {
					payload[i] = byte(i)
				}
				tx := NewTxFramer(m.markers, m.crc, DefaultMarkerSpacing)
				dst := make([]byte, 0, sz.n+sz.n/64+1024)
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dst = tx.AppendFPDU(dst[:0], payload)
				}
			})
		}
	}
}

// BenchmarkFPDUDecode measures RxDeframer.Next alone. It deframes a stream
// of consecutive FPDUs (so marker phases vary); because Next closes
// marker gaps in place, the stream is restored from a pristine copy, off
// the clock, each time it is used up.
func BenchmarkFPDUDecode(b *testing.B) {
	for _, m := range benchModes {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", m.name, sz.name), func(b *testing.B) {
				payload := make([]byte, sz.n)
				for i := range payload {
					payload[i] = byte(i)
				}
				tx := NewTxFramer(m.markers, m.crc, DefaultMarkerSpacing)
				var pristine []byte
				count := 0
				// 256 KiB, the size of a receive chunk: the octets are in
				// cache, as they are right after the read that brought them.
				for len(pristine) < 256<<10 || count < 8 {
					pristine = tx.AppendFPDU(pristine, payload)
					count++
				}
				stream := append([]byte(nil), pristine...)
				rx := NewRxDeframer(m.markers, m.crc, DefaultMarkerSpacing)
				off, done := 0, 0
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if done == count {
						b.StopTimer()
						copy(stream, pristine)
						rx.SetPos(0)
						off, done = 0, 0
						b.StartTimer()
					}
					_, n, err := rx.Next(stream[off:])
					if err != nil {
						b.Fatal(err)
					}
					off += n
					done++
				}
			})
		}
	}
}

// BenchmarkPlainCopy is the baseline: one copy of the same number of octets.
func BenchmarkPlainCopy(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			src := make([]byte, sz.n)
			dst := make([]byte, sz.n)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkCRC32C shows how much of the framing cost is the checksum.
func BenchmarkCRC32C(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			src := make([]byte, sz.n+6)
			b.SetBytes(int64(sz.n))
			for i := 0; i < b.N; i++ {
				CRC32C(src)
			}
		})
	}
}

// BenchmarkEncodeStrategy compares the three ways to frame one ULPDU with
// markers and CRC (copy into a marker-gapped buffer, fill in place between
// the gaps, gather for writev) with a plain copy of the same octets, in the
// same run. The gather strategy copies nothing: it only computes the CRC
// and builds the iovec list.
func BenchmarkEncodeStrategy(b *testing.B) {
	for _, sz := range benchSizes {
		payload := make([]byte, sz.n)
		for i := range payload {
			payload[i] = byte(i)
		}
		b.Run("plaincopy/"+sz.name, func(b *testing.B) {
			dst := make([]byte, sz.n)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				copy(dst, payload)
			}
		})
		b.Run("crconly/"+sz.name, func(b *testing.B) {
			// The CRC32C of the FPDU's octets alone: the floor for any
			// strategy that checksums them with the CPU's instruction.
			src := make([]byte, sz.n+sz.n/64+8)
			b.SetBytes(int64(sz.n))
			for i := 0; i < b.N; i++ {
				CRC32C(src)
			}
		})
		b.Run("copy/"+sz.name, func(b *testing.B) {
			tx := NewTxFramer(true, true, DefaultMarkerSpacing)
			dst := make([]byte, 0, sz.n+sz.n/64+1024)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				dst = tx.AppendFPDU(dst[:0], payload)
			}
		})
		b.Run("inplace/"+sz.name, func(b *testing.B) {
			tx := NewTxFramer(true, true, DefaultMarkerSpacing)
			dst := make([]byte, 0, sz.n+sz.n/64+1024)
			pieces := make([][]byte, 0, sz.n/500+2)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var r Reserved
				dst, r = tx.ReserveFPDU(dst[:0], sz.n, pieces)
				rest := payload
				for _, p := range r.Pieces {
					rest = rest[copy(p, rest):]
				}
				tx.SealFPDU(r)
			}
		})
		b.Run("gather/"+sz.name, func(b *testing.B) {
			tx := NewTxFramer(true, true, DefaultMarkerSpacing)
			iov := make([][]byte, 0, 2*(sz.n/500)+8)
			side := make([]byte, 0, 4*(sz.n/500)+16)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				iov, side = tx.GatherFPDU(iov[:0], side[:0], payload)
			}
		})
	}
}

// BenchmarkDecodeStrategy compares the two receive paths for a tagged FPDU
// with markers and CRC, beside a plain copy of the payload in the same run:
//
//   - chunk: the FPDU is in the receive chunk; RxDeframer.Next checks the
//     markers and the CRC and closes the marker gaps in place, and the
//     payload is then copied into the destination region.
//   - direct: the payload octets go straight into the region between the
//     marker slots (here a copy from the wire image stands in for the
//     kernel's copy into the recvmsg iovecs), and the CRC runs over the
//     region's bytes and the slots, as QP.fillDirect does.
func BenchmarkDecodeStrategy(b *testing.B) {
	for _, sz := range benchSizes {
		payload := make([]byte, sz.n)
		for i := range payload {
			payload[i] = byte(i)
		}
		tx := NewTxFramer(true, true, DefaultMarkerSpacing)
		if err := tx.SetPos(256); err != nil { // markers fall inside the FPDU
			b.Fatal(err)
		}
		wire := tx.AppendFPDU(nil, payload)
		region := make([]byte, sz.n)
		b.Run("plaincopy/"+sz.name, func(b *testing.B) {
			b.SetBytes(int64(sz.n))
			for i := 0; i < b.N; i++ {
				copy(region, payload)
			}
		})
		b.Run("chunk/"+sz.name, func(b *testing.B) {
			buf := make([]byte, len(wire))
			rx := NewRxDeframer(true, true, DefaultMarkerSpacing)
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				copy(buf, wire) // the octets as the read left them
				rx.pos = 256
				ulpdu, _, err := rx.Next(buf)
				if err != nil {
					b.Fatal(err)
				}
				copy(region, ulpdu)
			}
		})
		b.Run("direct/"+sz.name, func(b *testing.B) {
			// The wire layout of the payload: runs between markers.
			rx := NewRxDeframer(true, true, DefaultMarkerSpacing)
			rx.pos = 256
			hdr, ulen, first, n, err := rx.header(wire)
			if err != nil || n != len(wire) || ulen != sz.n {
				b.Fatal(err)
			}
			type run struct{ w, r, n int }
			var runs []run
			var marks []int
			w, r := hdr+ulpduLenLen, 0
			next := first
			if first < hdr+ulpduLenLen {
				next = first + DefaultMarkerSpacing
			}
			for r < ulen {
				if w == next {
					marks = append(marks, w)
					w += MarkerLen
					next += DefaultMarkerSpacing
				}
				k := min(ulen-r, next-w)
				runs = append(runs, run{w, r, k})
				w += k
				r += k
			}
			end := len(wire) - crcLen
			want := binary.LittleEndian.Uint32(wire[end:])
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				crc := CRC32C(wire[:hdr+ulpduLenLen])
				at := hdr + ulpduLenLen
				for _, x := range runs {
					if x.w != at { // a marker slot comes first
						crc = UpdateCRC32C(crc, wire[at:x.w])
					}
					copy(region[x.r:x.r+x.n], wire[x.w:x.w+x.n])
					crc = UpdateCRC32C(crc, region[x.r:x.r+x.n])
					at = x.w + x.n
				}
				crc = UpdateCRC32C(crc, wire[at:end])
				if crc != want {
					b.Fatal("CRC")
				}
			}
			_ = marks
		})
	}
}

// BenchmarkReceiveSegments measures the receive path per FPDU after the
// read: deframing, the DDP header, the untagged queue's checks and the
// hand-off of each segment (NextSegment, Release), for 64 KiB Sends cut
// for 1448-octet segments (a 1500-octet MTU), read from memory. ns/op is
// per FPDU; the QP starts anew, off the clock, when the stream is used up.
func BenchmarkReceiveSegments(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			tx := NewQP(-1)
			tx.StartFullOperation(m.markers, m.markers, m.crc, DefaultMarkerSpacing, 1448)
			msg := pattern(64<<10, 3)
			for range 64 {
				tx.PostSend(OpSend, msg)
			}
			wire := append([]byte(nil), tx.txbuf...)
			fpdus := len(tx.txEnds)
			var rx *QP
			done := fpdus
			b.SetBytes(int64(len(msg)) * 64 / int64(fpdus))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if done == fpdus {
					b.StopTimer()
					rx = NewQP(-1)
					rx.UseStream(&pipeStream{in: bytes.NewBuffer(wire), out: new(bytes.Buffer)})
					rx.StartFullOperation(m.markers, m.markers, m.crc, DefaultMarkerSpacing, 1448)
					done = 0
					b.StartTimer()
				}
				seg, err := rx.NextSegment()
				for err == ErrNeedMore {
					if _, err = rx.Fill(); err != nil {
						b.Fatal(err)
					}
					seg, err = rx.NextSegment()
				}
				if err != nil {
					b.Fatal(err)
				}
				seg.Release()
				done++
			}
		})
	}
}
