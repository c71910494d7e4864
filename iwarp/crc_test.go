package iwarp

import (
	"bytes"
	"hash/crc32"
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
