package shm

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"
)

// FuzzRing: whatever a hostile peer writes into the shared memory (the
// producer's position, the consumer's position, the records), each end only
// returns records that lie within what the other end published, or
// ErrCorrupt, and never panics or reads outside the ring.
func FuzzRing(f *testing.F) {
	f.Add(uint64(16), uint64(0), []byte("\x05\x00\x00\x00\x00\x00\x00\x00hello\x00\x00\x00"))
	f.Add(uint64(4096+8), uint64(0), []byte{})
	f.Add(uint64(24), uint64(8), []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(^uint64(0), ^uint64(0), []byte("\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, head, tail uint64, data []byte) {
		const size = 4096
		mem := make([]byte, RingBytes(size)+64)
		// 64-aligned as a mapping is
		off := 0
		for addr(mem[off:])%64 != 0 {
			off++
		}
		mem = mem[off : off+RingBytes(size)]
		copy(mem[ControlSize:], data)
		c, err := NewConsumer(mem)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint64(mem[offHead:], head)
		var got []byte
		consumed := uint64(0)
		for i := 0; i < 1000; i++ {
			got, err = c.Next(got[:0])
			if err != nil {
				if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Next: %v", err)
				}
				break
			}
			consumed += recordLen(uint64(len(got)))
			if consumed > head || len(got) > MaxRecord(size) {
				t.Fatalf("record of %d bytes: %d consumed past head %d", len(got), consumed, head)
			}
		}

		// The same memory read as a byte stream, in pieces of a size
		// the input chooses: never more bytes than were published.
		s, err := NewConsumer(mem)
		if err != nil {
			t.Fatal(err)
		}
		piece := make([]byte, 1+int(tail%5000))
		read := uint64(0)
		for i := 0; i < 1000; i++ {
			// Holds agrees with what Read then takes.
			held := len(piece)
			ok, herr := s.Holds(held)
			for herr == nil && !ok && held > 0 {
				held /= 2
				ok, herr = s.Holds(held)
			}
			if herr != nil && !errors.Is(herr, ErrCorrupt) {
				t.Fatalf("Holds: %v", herr)
			}
			n, err := s.Read(piece)
			if herr == nil && err == nil && n < held {
				t.Fatalf("Read took %d bytes, Holds said %d", n, held)
			}
			read += uint64(n)
			if read > head {
				t.Fatalf("%d bytes read past head %d", read, head)
			}
			if err != nil {
				if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Read: %v", err)
				}
				break
			}
		}

		// The producer's view of a hostile consumer's position.
		p, err := NewProducer(mem)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint64(mem[offTail:], tail)
		for i := 0; i < 100; i++ {
			err := p.Append(data[:len(data)%size])
			if err == nil {
				p.Publish()
				continue
			}
			if !errors.Is(err, ErrFull) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooBig) {
				t.Fatalf("Append: %v", err)
			}
			break
		}
		if room, err := p.Room(); err == nil && (room < 0 || room > MaxRecord(size)) {
			t.Fatalf("room %d", room)
		}
	})
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
