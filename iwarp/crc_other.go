//go:build !amd64

package iwarp

import (
	"hash/crc32"
	"runtime"

	"golang.org/x/sys/cpu"
)

// crcInstruction reports whether hash/crc32 uses a CPU instruction for the
// Castagnoli polynomial here: on arm64 with the CRC32 extension, the test it
// makes itself.
func crcInstruction() bool { return runtime.GOARCH == "arm64" && cpu.ARM64.HasCRC32 }

func updateCRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli(), p) }

func crcFolding() bool { return false }

func encodeFolds(spacing int) bool { return false }

const encodeFoldMin = 1 << 30

func (w *fpduWriter) foldRest(src []byte) (int, uint32) {
	panic("iwarp: no vector folding on this architecture")
}

func (f *TxFramer) gatherCRC(parts [][]byte, ulen, first, count int) (uint32, bool) { return 0, false }
