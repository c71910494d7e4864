package iwarp

import (
	"bytes"
	"hash/crc32"
	"math/rand"
	"testing"
)

func TestCRC32CVectors(t *testing.T) {
	inc := make([]byte, 32)
	for i := range inc {
		inc[i] = byte(i)
	}
	dec := make([]byte, 32)
	for i := range dec {
		dec[i] = byte(31 - i)
	}
	tests := []struct {
		name string
		in   []byte
		want uint32
	}{
		{"check value", []byte("123456789"), 0xE3069283},
		{"empty", nil, 0},
		// RFC 3720 Appendix B.4.
		{"32 x 0x00", make([]byte, 32), 0x8a9136aa},
		{"32 x 0xff", bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
		{"0..31", inc, 0x46dd794e},
		{"31..0", dec, 0x113fdb5c},
	}
	for _, tt := range tests {
		if got := CRC32C(tt.in); got != tt.want {
			t.Errorf("%s: CRC32C = %#08x, want %#08x", tt.name, got, tt.want)
		}
	}
}

func TestCRC32CMatchesStdlibAndIsIncremental(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	b := make([]byte, 5000)
	for i := range b {
		b[i] = byte(i*7 + i>>3)
	}
	for _, n := range []int{0, 1, 3, 15, 16, 17, 63, 64, 255, 1024, 4999, 5000} {
		want := crc32.Checksum(b[:n], tab)
		if got := CRC32C(b[:n]); got != want {
			t.Fatalf("len %d: CRC32C %#08x, stdlib %#08x", n, got, want)
		}
		for _, split := range []int{0, n / 3, n / 2, n} {
			if got := UpdateCRC32C(CRC32C(b[:split]), b[split:n]); got != want {
				t.Fatalf("len %d split %d: incremental %#08x, want %#08x", n, split, got, want)
			}
		}
	}
}

// The vector folding path (crc_amd64.s, taken from foldMin octets up when
// the CPU has AVX-512 VPCLMULQDQ) agrees with the standard library for every
// length class, alignment and starting CRC.
func TestCRC32CFoldingMatchesStdlib(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	r := rand.New(rand.NewSource(32))
	buf := make([]byte, 70000+64)
	r.Read(buf)
	lengths := []int{1023, 1024, 1025, 1087, 1088, 1279, 1280, 1344, 2047, 4096, 4100, 6143, 6144, 6145, 6207, 6208, 8192, 65022, 65535, 70000}
	for i := 0; i < 300; i++ {
		lengths = append(lengths, r.Intn(70000))
	}
	for _, n := range lengths {
		off := r.Intn(64)
		p := buf[off : off+n]
		if got, want := CRC32C(p), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d at offset %d: %#08x, want %#08x (folding: %t)", n, off, got, want, crcFolding())
		}
		split := r.Intn(n + 1)
		if got, want := UpdateCRC32C(CRC32C(p[:split]), p[split:]), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d split %d: %#08x, want %#08x", n, split, got, want)
		}
	}
	t.Logf("vector folding in use: %t", crcFolding())
}
