// CRC32C by carry-less multiplication on 512-bit vectors (AVX-512
// VPCLMULQDQ): four independent accumulators of 64 octets fold the input
// 256 octets at a time, so the multiplier's latency is hidden, then merge
// into one. The final lane reduction and Barrett step are those of Go's
// hash/crc32 and klauspost/crc32 (BSD licence, The Go Authors), with the
// Castagnoli constants. Constants: for a fold across D octets, the pair
// (x^(8D+32) mod P, x^(8D-32) mod P), bit-reflected and shifted left by one.

#include "textflag.h"

// func crc32cFold512(crc uint32, p []byte) uint32
// crc is not inverted; len(p) is a multiple of 64 and at least 256.
TEXT ·crc32cFold512(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VPXORQ    Z0, Z0, Z0
	VMOVQ     AX, X0
	VMOVDQU64 0(SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z0, Z1, Z1 // the initial CRC joins the first octets
	ADDQ      $256, SI
	SUBQ      $256, CX

	VMOVDQU64 k256<>+0(SB), Z0

loop256:
	CMPQ CX, $256
	JB   merge
	VMOVDQU64  0(SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop256

merge:
	// Z1 folds into Z2, Z2 into Z3, Z3 into Z4, 64 octets each time.
	VMOVDQU64  k64<>+0(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z2, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z3, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z5, Z1

loop64:
	CMPQ CX, $64
	JB   lanes
	VMOVDQU64  0(SI), Z11
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z11, Z5, Z1
	ADDQ       $64, SI
	SUBQ       $64, CX
	JMP        loop64

lanes:
	// The four 16-octet lanes of Z1 fold into X1.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	MOVOU         k16<>+0(SB), X0

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

	// 128 bits to 64, then Barrett reduction to 32.
	PCMPEQB   X3, X3
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1

	MOVOA X1, X2
	MOVQ  k5<>+0(SB), X0

	PSRLQ $32, X3 // 32-bit mask

	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	MOVOU poly<>+0(SB), X0

	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	PEXTRD $1, X1, AX
	MOVL   AX, ret+32(FP)
	VZEROUPPER
	RET

// func encodeFold512(crc uint32, out, src *byte, groups, toMarker int, fpduptr uint32, spacing int) uint32
//
// The wire octets out[0:256] are written; encodeFold512 writes groups*256
// more after them, each 64-octet block taken from src, or, where a marker
// falls in it (toMarker octets ahead, FPDUPTR fpduptr, then every spacing
// octets, spacing >= 64), 60 octets of src around the marker. It returns
// the CRC (not inverted; crc is the initial value, not inverted) of
// everything it wrote and the 256 octets before.
TEXT ·encodeFold512(SB), NOSPLIT, $0-60
	MOVL crc+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ toMarker+32(FP), DX
	MOVL fpduptr+40(FP), R13
	MOVQ spacing+48(FP), R14
	MOVL R13, R12
	BSWAPL R12

	VPXORQ    Z0, Z0, Z0
	VMOVQ     AX, X0
	VMOVDQU64 0(DI), Z1
	VMOVDQU64 64(DI), Z2
	VMOVDQU64 128(DI), Z3
	VMOVDQU64 192(DI), Z4
	VPXORQ    Z0, Z1, Z1
	ADDQ      $256, DI
	VMOVDQU64 k256<>+0(SB), Z0

encloop:
	TESTQ CX, CX
	JZ    encmerge
	// wire block into Z11: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   b1_m
	VMOVDQU64 (SI), Z11
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  b1_d
b1_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z11
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z11
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
b1_d:
	VMOVDQU64 Z11, (DI)
	ADDQ $64, DI
	// wire block into Z12: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   b2_m
	VMOVDQU64 (SI), Z12
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  b2_d
b2_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z12
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z12
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
b2_d:
	VMOVDQU64 Z12, (DI)
	ADDQ $64, DI
	// wire block into Z13: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   b3_m
	VMOVDQU64 (SI), Z13
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  b3_d
b3_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z13
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z13
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
b3_d:
	VMOVDQU64 Z13, (DI)
	ADDQ $64, DI
	// wire block into Z14: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   b4_m
	VMOVDQU64 (SI), Z14
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  b4_d
b4_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z14
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z14
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
b4_d:
	VMOVDQU64 Z14, (DI)
	ADDQ $64, DI
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	DECQ CX
	JMP  encloop

encmerge:
	// Z1 folds into Z2, Z2 into Z3, Z3 into Z4, 64 octets each time.
	VMOVDQU64  k64<>+0(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z2, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z3, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z5, Z1

	// The four 16-octet lanes of Z1 fold into X1.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	MOVOU         k16<>+0(SB), X0

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

	// 128 bits to 64, then Barrett reduction to 32.
	PCMPEQB   X3, X3
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1

	MOVOA X1, X2
	MOVQ  k5<>+0(SB), X0

	PSRLQ $32, X3 // 32-bit mask

	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	MOVOU poly<>+0(SB), X0

	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	PEXTRD $1, X1, AX
	MOVL   AX, ret+56(FP)
	VZEROUPPER
	RET

// func foldWire512(crc uint32, out, src *byte, groups, toMarker int, fpduptr uint32, spacing int) uint32
//
// foldWire512 is encodeFold512 without the stores: it returns the CRC of
// the wire octets out[0:256] followed by groups*256 octets built from src
// and markers as encodeFold512 builds them, and writes nothing (the gather
// strategy, whose octets go out by writev from where they are).
TEXT ·foldWire512(SB), NOSPLIT, $0-60
	MOVL crc+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ toMarker+32(FP), DX
	MOVL fpduptr+40(FP), R13
	MOVQ spacing+48(FP), R14
	MOVL R13, R12
	BSWAPL R12

	VPXORQ    Z0, Z0, Z0
	VMOVQ     AX, X0
	VMOVDQU64 0(DI), Z1
	VMOVDQU64 64(DI), Z2
	VMOVDQU64 128(DI), Z3
	VMOVDQU64 192(DI), Z4
	VPXORQ    Z0, Z1, Z1
	ADDQ      $256, DI
	VMOVDQU64 k256<>+0(SB), Z0

wireloop:
	TESTQ CX, CX
	JZ    wiremerge
	// wire block into Z11: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   w1_m
	VMOVDQU64 (SI), Z11
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  w1_d
w1_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z11
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z11
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
w1_d:
	// wire block into Z12: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   w2_m
	VMOVDQU64 (SI), Z12
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  w2_d
w2_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z12
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z12
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
w2_d:
	// wire block into Z13: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   w3_m
	VMOVDQU64 (SI), Z13
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  w3_d
w3_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z13
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z13
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
w3_d:
	// wire block into Z14: 64 source octets, or 60 around a marker
	CMPQ DX, $64
	JB   w4_m
	VMOVDQU64 (SI), Z14
	ADDQ $64, SI
	SUBQ $64, DX
	JMP  w4_d
w4_m:
	MOVQ   $0xF, R8
	SHLXQ  DX, R8, R8
	NOTQ   R8
	KMOVQ  R8, K1
	VPEXPANDB.Z (SI), K1, Z14
	MOVQ   DX, R9
	SHRQ   $2, R9
	MOVL   $1, R10
	SHLXL  R9, R10, R10
	KMOVW  R10, K2
	VPBROADCASTD R12, K2, Z14
	ADDQ   $60, SI
	ADDQ   R14, DX
	SUBQ   $64, DX
	ADDL   R14, R13
	MOVL   R13, R12
	BSWAPL R12
w4_d:
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	DECQ CX
	JMP  wireloop

wiremerge:
	// Z1 folds into Z2, Z2 into Z3, Z3 into Z4, 64 octets each time.
	VMOVDQU64  k64<>+0(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z2, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z3, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z5, Z1

	// The four 16-octet lanes of Z1 fold into X1.
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	MOVOU         k16<>+0(SB), X0

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

	// 128 bits to 64, then Barrett reduction to 32.
	PCMPEQB   X3, X3
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1

	MOVOA X1, X2
	MOVQ  k5<>+0(SB), X0

	PSRLQ $32, X3 // 32-bit mask

	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	MOVOU poly<>+0(SB), X0

	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	PEXTRD $1, X1, AX
	MOVL   AX, ret+56(FP)
	VZEROUPPER
	RET


// Fold across 256 octets: x^2080, x^2016.
DATA k256<>+0(SB)/8, $0x0dcb17aa4
DATA k256<>+8(SB)/8, $0x0b9e02b86
DATA k256<>+16(SB)/8, $0x0dcb17aa4
DATA k256<>+24(SB)/8, $0x0b9e02b86
DATA k256<>+32(SB)/8, $0x0dcb17aa4
DATA k256<>+40(SB)/8, $0x0b9e02b86
DATA k256<>+48(SB)/8, $0x0dcb17aa4
DATA k256<>+56(SB)/8, $0x0b9e02b86
GLOBL k256<>(SB), RODATA, $64

// Fold across 64 octets: x^544, x^480.
DATA k64<>+0(SB)/8, $0x0740eef02
DATA k64<>+8(SB)/8, $0x09e4addf8
DATA k64<>+16(SB)/8, $0x0740eef02
DATA k64<>+24(SB)/8, $0x09e4addf8
DATA k64<>+32(SB)/8, $0x0740eef02
DATA k64<>+40(SB)/8, $0x09e4addf8
DATA k64<>+48(SB)/8, $0x0740eef02
DATA k64<>+56(SB)/8, $0x09e4addf8
GLOBL k64<>(SB), RODATA, $64

// Fold across 16 octets: x^160, x^96.
DATA k16<>+0(SB)/8, $0xf20c0dfe
DATA k16<>+8(SB)/8, $0x14cd00bd6
GLOBL k16<>(SB), RODATA, $16

// x^64, and the Barrett constants (P and floor(x^64 / P), reflected).
DATA k5<>+0(SB)/8, $0xdd45aab8
GLOBL k5<>(SB), RODATA, $8
DATA poly<>+0(SB)/8, $0x105ec76f0
DATA poly<>+8(SB)/8, $0xdea713f1
GLOBL poly<>(SB), RODATA, $16
