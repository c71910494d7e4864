package iwarp

import (
	"strconv"
	"testing"

	"hash/crc32"
)

// BenchmarkCRC32CFold compares the two ways updateCRC32C has of computing
// CRC32C over one buffer: the crc32 instruction (hash/crc32) and
// vector folding (crc32cFold512), whose fixed cost of setting up and
// reducing makes it the slower below foldMin:
//
//	go test -run '^$' -bench BenchmarkCRC32CFold ./iwarp
func BenchmarkCRC32CFold(b *testing.B) {
	if !foldAVX512() {
		b.Skip("no AVX-512 carry-less multiplication on this CPU")
	}
	for _, n := range []int{1024, 1430, 4096, 6144, 8192, 16384, 65536} {
		src := make([]byte, n)
		b.Run("crc32-instruction/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				crc32.Update(0, castagnoli(), src)
			}
		})
		b.Run("fold/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				crc32cFold512(0, src[:n&^63]) // its input: whole 64-octet blocks
			}
		})
	}
}
