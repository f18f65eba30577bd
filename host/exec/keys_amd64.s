//go:build amd64 && !purego

#include "textflag.h"

// func copyKeysAVX2(dst, src *int32, blocks int) uint32
// Copies blocks·32 keys (blocks ≥ 1) from src to dst, 128 bytes a pass, and returns their
// unsigned maximum: four running maxima (VPMAXUD), folded across lanes at the end.
TEXT ·copyKeysAVX2(SB), NOSPLIT, $0-28
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    blocks+16(FP), CX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VPXOR   Y2, Y2, Y2
	VPXOR   Y3, Y3, Y3

ckloop:
	VMOVDQU 0(SI), Y4
	VMOVDQU 32(SI), Y5
	VMOVDQU 64(SI), Y6
	VMOVDQU 96(SI), Y7
	VMOVDQU Y4, 0(DI)
	VMOVDQU Y5, 32(DI)
	VMOVDQU Y6, 64(DI)
	VMOVDQU Y7, 96(DI)
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     ckloop

	VPMAXUD      Y1, Y0, Y0
	VPMAXUD      Y3, Y2, Y2
	VPMAXUD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+24(FP)
	RET
