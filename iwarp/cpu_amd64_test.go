package iwarp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/cpu"
)

// TestDetectX86: the package's own CPUID (cpu_amd64.go) finds what golang.org/x/sys/cpu finds
// for every feature the CRC paths choose by, OS support for the AVX-512 state included.
func TestDetectX86(t *testing.T) {
	f := detectX86()
	assert.Equal(t, cpu.X86.HasSSE42, f.sse42, "SSE4.2")
	fold := cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ
	assert.Equal(t, fold, f.fold, "AVX-512 folding")
	assert.Equal(t, fold && cpu.X86.HasAVX512VBMI2 && cpu.X86.HasBMI2, f.foldEncode, "folding while copying")
	assert.Equal(t, f, x86(), "x86 caches the answer")
	t.Logf("sse4.2 %t, folding %t, folding while copying %t", f.sse42, f.fold, f.foldEncode)
}
