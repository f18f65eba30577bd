//go:build amd64 && !purego

#include "textflag.h"

// Row operations' vector forms (rowops_amd64.go).

// func sumSquaresAVX2(x *float32, blocks int, acc *[32]float32)
// acc[l] = fma(x[32b+l], x[32b+l], acc[l]) for b = 0 … blocks−1 in order, l < 32: the lane
// chains of rmsScale (rmsnorm.go), 32 lanes in four registers, hardware FMA (IEEE, round to
// nearest; NaN payloads may differ, which the lane sum makes canonical).
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), SI
	MOVQ    blocks+8(FP), CX
	MOVQ    acc+16(FP), DI
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	TESTQ   CX, CX
	JZ      ssdone

ssloop:
	VMOVUPS     0(SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ        $128, SI
	DECQ        CX
	JNZ         ssloop

ssdone:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// q8_K conversion constants: |x| mask, the canonical NaN, 1.5·2^23 (round to an integer in
// the low mantissa bits), the mantissa mask, 2^22, 127, −127.0, 1.0; byte and int16 ones;
// VPERMD indices restoring value order after the in-lane packs.
DATA q8kc<>+0(SB)/4, $0x7fffffff
DATA q8kc<>+4(SB)/4, $0x7fffffff
DATA q8kc<>+8(SB)/4, $0x4b400000
DATA q8kc<>+12(SB)/4, $0x007fffff
DATA q8kc<>+16(SB)/4, $0x00400000
DATA q8kc<>+20(SB)/4, $127
DATA q8kc<>+24(SB)/4, $0xc2fe0000
DATA q8kc<>+28(SB)/4, $0x3f800000
DATA q8kc<>+32(SB)/4, $0x01010101
DATA q8kc<>+36(SB)/4, $0x00010001
DATA q8kc<>+40(SB)/4, $0
DATA q8kc<>+44(SB)/4, $4
DATA q8kc<>+48(SB)/4, $1
DATA q8kc<>+52(SB)/4, $5
DATA q8kc<>+56(SB)/4, $2
DATA q8kc<>+60(SB)/4, $6
DATA q8kc<>+64(SB)/4, $3
DATA q8kc<>+68(SB)/4, $7
GLOBL q8kc<>(SB), RODATA|NOPTR, $72

// func q8KBlockAVX2(dst *byte, x *float32)
// q8KBlock (act.go) for one block of 256 values, operation for operation: the largest |x|
// (NaNs never chosen: VMAXPS returns its second source when the first is a NaN) and the first
// value that has it; iscale = −127/max; q = the low mantissa bits of Canon(iscale·x) + 1.5·2²³
// less 2²², at most 127; d = 1/iscale; the 16 sums of 16 quants.
TEXT ·q8KBlockAVX2(SB), NOSPLIT, $0-16
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS q8kc<>+0(SB), Y15 // |x| mask
	VXORPS       Y0, Y0, Y0
	XORQ         AX, AX

q8kamax:
	VANDPS (SI)(AX*4), Y15, Y1
	VMAXPS Y0, Y1, Y0 // max(|x|, amax): amax where |x| is a NaN
	ADDQ   $8, AX
	CMPQ   AX, $256
	JLT    q8kamax

	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X1, X0, X0 // amax in every lane
	VXORPS       X2, X2, X2
	VUCOMISS     X2, X0
	JNE          q8knonzero

	// an all-zero (or zero and NaN) block: every byte 0
	VXORPS  Y0, Y0, Y0
	XORQ    AX, AX
q8kzero:
	VMOVDQU Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, $288
	JLT     q8kzero
	MOVL    $0, 288(DI)
	VZEROUPPER
	RET

q8knonzero:
	// max: the first value whose |x| is amax
	VBROADCASTSS X0, Y0
	XORQ         AX, AX
q8kfind:
	VANDPS    (SI)(AX*4), Y15, Y1
	VCMPPS    $0, Y0, Y1, Y1 // |x| == amax
	VMOVMSKPS Y1, BX
	TESTL     BX, BX
	JNZ       q8kfound
	ADDQ      $8, AX
	JMP       q8kfind
q8kfound:
	TZCNTL BX, BX
	ADDQ   BX, AX
	VMOVSS (SI)(AX*4), X1     // max
	VMOVSS q8kc<>+24(SB), X2  // −127
	VDIVSS X1, X2, X2         // iscale = −127/max
	VMOVSS q8kc<>+28(SB), X3  // 1
	VDIVSS X2, X3, X3         // d = 1/iscale
	VMOVSS X3, (DI)
	VBROADCASTSS X2, Y14      // iscale
	VBROADCASTSS q8kc<>+4(SB), Y13  // canonical NaN
	VBROADCASTSS q8kc<>+8(SB), Y12  // 1.5·2^23
	VPBROADCASTD q8kc<>+12(SB), Y11 // mantissa mask
	VPBROADCASTD q8kc<>+16(SB), Y10 // 2^22
	VPBROADCASTD q8kc<>+20(SB), Y9  // 127
	VPBROADCASTD q8kc<>+32(SB), Y8  // byte ones
	VPBROADCASTD q8kc<>+36(SB), Y7  // int16 ones
	VMOVDQU      q8kc<>+40(SB), Y6  // pack order

	XORQ AX, AX // values done
	XORQ CX, CX // bsums written

#define Q8K_QUANT(off, dst) \
	VMULPS    off(SI)(AX*4), Y14, dst \
	VCMPPS    $3, dst, dst, Y5        \
	VBLENDVPS Y5, Y13, dst, dst       \
	VADDPS    Y12, dst, dst           \
	VPAND     Y11, dst, dst           \
	VPSUBD    Y10, dst, dst           \
	VPMINSD   Y9, dst, dst

q8kquant:
	// 32 values: quants as int32, packed to bytes in value order
	Q8K_QUANT(0, Y0)
	Q8K_QUANT(32, Y1)
	Q8K_QUANT(64, Y2)
	Q8K_QUANT(96, Y3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y6, Y0
	VMOVDQU   Y0, 4(DI)(AX*1)
	// the two groups' sums: bytes in pairs, then quads, then within each 128-bit lane
	VPMADDUBSW Y0, Y8, Y1
	VPMADDWD   Y7, Y1, Y1
	VPHADDD    Y1, Y1, Y1
	VPHADDD    Y1, Y1, Y1
	VMOVD      X1, BX
	MOVW       BX, 260(DI)(CX*2)
	VEXTRACTI128 $1, Y1, X1
	VMOVD      X1, BX
	MOVW       BX, 262(DI)(CX*2)
	ADDQ       $2, CX
	ADDQ       $32, AX
	CMPQ       AX, $256
	JLT        q8kquant
	VZEROUPPER
	RET

// func scaleMulAVX2(y, x, w *float32, n int, s float32)
// y[i] = Canon(float32(x[i]·s)·w[i]) for i < n, n a multiple of 8: rmsnormRow's products,
// each rounded, a NaN made the canonical one.
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-36
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Y15
	VBROADCASTSS q8kc<>+4(SB), Y14 // canonical NaN
	XORQ         AX, AX
	TESTQ        CX, CX
	JZ           smdone

smloop:
	VMULPS    (SI)(AX*4), Y15, Y0
	VMULPS    (DX)(AX*4), Y0, Y0
	VCMPPS    $3, Y0, Y0, Y1
	VBLENDVPS Y1, Y14, Y0, Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, CX
	JLT       smloop

smdone:
	VZEROUPPER
	RET
