package iwarp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/cpu"
)

// TestDetectX86: the package's own CPUID (cpu_amd64.go) finds what golang.org/x/sys/cpu finds
// for every feature the CRC paths choose by, OS support for the AVX-512 state included, and
// x86 caches that answer.
func TestDetectX86(t *testing.T) {
	f := detectX86()
	assert.Equal(t, cpu.X86.HasSSE42, f.sse42, "SSE4.2")
	fold := cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ
	assert.Equal(t, fold, f.fold, "AVX-512 folding")
	assert.Equal(t, fold && cpu.X86.HasAVX512VBMI2 && cpu.X86.HasBMI2, f.foldEncode, "folding while copying")
	s := x86()
	assert.NotZero(t, s&x86Known)
	assert.Equal(t, f.sse42, s&x86SSE42 != 0)
	assert.Equal(t, f.fold, s&x86Fold != 0)
	assert.Equal(t, f.foldEncode, s&x86FoldEncode != 0)
	assert.Equal(t, s, x86(), "asked once")
	t.Logf("sse4.2 %t, folding %t, folding while copying %t", f.sse42, f.fold, f.foldEncode)
}
