package iwarp

import "sync"

// The CPU features the CRC needs, found with CPUID the first time a CRC is
// computed rather than at package initialisation: every preloaded process
// loads the engine, and one whose connections all stay on this host (shared
// memory, no CRC) never needs them. golang.org/x/sys/cpu, which this used,
// runs about a dozen CPUID instructions at initialisation, each a trap to
// the hypervisor in a VM (about 10 µs here).

// cpuid and xgetbv are in cpuid_amd64.s.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

// x86Features is what this package asks of the CPU.
type x86Features struct {
	sse42      bool // the crc32 instruction
	fold       bool // AVX-512 carry-less multiplication folding (crc_amd64.s)
	foldEncode bool // fold with VBMI2 and BMI2: copy and checksum in one pass
}

// detectX86 asks the CPU, and the OS for the register state AVX-512 needs
// (XCR0: SSE, AVX, opmask and both halves of the ZMM registers), as
// golang.org/x/sys/cpu does.
func detectX86() x86Features {
	bit := func(r uint32, n uint) bool { return r>>n&1 == 1 }
	var f x86Features
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 1 {
		return f
	}
	_, _, ecx1, _ := cpuid(1, 0)
	f.sse42 = bit(ecx1, 20)
	pclmul := bit(ecx1, 1)
	osAVX512 := false
	if bit(ecx1, 27) { // OSXSAVE: XGETBV works
		xcr0, _ := xgetbv()
		osAVX512 = xcr0&0xe6 == 0xe6 // bits 1, 2, 5, 6, 7
	}
	if maxLeaf < 7 || !osAVX512 {
		return f
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	avx512f, avx512vl, bmi2 := bit(ebx7, 16), bit(ebx7, 31), bit(ebx7, 8)
	vbmi2, vpclmul := bit(ecx7, 6), bit(ecx7, 10)
	f.fold = avx512f && avx512vl && vpclmul && pclmul
	f.foldEncode = f.fold && vbmi2 && bmi2
	return f
}

// x86 returns the features, asking the CPU at the first call.
var x86 = sync.OnceValue(detectX86)
