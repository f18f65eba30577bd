//go:build amd64 && !purego

#include "textflag.h"

// Widening of 16-bit cache elements to float32 for the attention twin (attention_amd64.go).
// A NaN becomes the canonical NaN 0x7fffffff, as widenF16Go and widenBF16Go give it.

DATA widenNaN<>+0(SB)/4, $0x7fffffff
GLOBL widenNaN<>(SB), RODATA|NOPTR, $4

// func widenF16AVX2(dst *float32, src *uint16, n int)
// dst[i] = Canon(F16ToF32(src[i])) for i < n, n a positive multiple of 8.
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS widenNaN<>(SB), Y3
	SHRQ         $3, CX

f16loop:
	VCVTPH2PS (SI), Y0
	VCMPPS    $3, Y0, Y0, Y1 // unordered: NaN lanes
	VBLENDVPS Y1, Y3, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       f16loop
	VZEROUPPER
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
// dst[i] = Canon(BF16ToF32(src[i])) for i < n, n a positive multiple of 8.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS widenNaN<>(SB), Y3
	SHRQ         $3, CX

bf16loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VCMPPS    $3, Y0, Y0, Y1
	VBLENDVPS Y1, Y3, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bf16loop
	VZEROUPPER
	RET
