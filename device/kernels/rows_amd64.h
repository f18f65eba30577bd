// The rows forms' shared pieces (simd_amd64.s, tile_amd64.s): a function
// func(w, x *byte, a *rowsArgs, out *float32) with a 144-byte frame holding the 32 lane
// accumulators at 0(SP), the row index at 128(SP) and the next line to prefetch (0: none) at
// 136(SP); R14 the rowsArgs, R9 the current row, R8 the accumulators.
//
// rowsArgs (simd_amd64.go), at R14:
//	0 stride, 8 low, 16 high, 24 scale, 32 f16 (the sections' offsets in a row), 40 blocks,
//	48 rows, 56 pfrows (the rows for which the bytes ahead on are prefetched), 64 ahead,
//	72 pfl (64-byte lines prefetched per super-block)

// The lane fold of the 32 accumulators at R8 (num.WarpTotal's butterfly, as warpTotalAVX),
// a NaN made the canonical one, into X0. Clobbers X1, AX.
#define ROW_FOLD(label) \
	VMOVUPS      0(R8), Y0        \
	VMOVUPS      32(R8), Y1       \
	VADDPS       64(R8), Y0, Y0   \
	VADDPS       96(R8), Y1, Y1   \
	VADDPS       Y1, Y0, Y0       \
	FOLD8(label)

// The butterfly's last steps over the 8 lanes in Y0 (lane l with l+4, then l+2, then l+1)
// into X0, a NaN made the canonical one. Clobbers X1, AX.
#define FOLD8(label) \
	VEXTRACTF128 $1, Y0, X1       \
	VADDPS       X1, X0, X0       \
	VMOVHLPS     X0, X0, X1       \
	VADDPS       X1, X0, X0       \
	VMOVSHDUP    X0, X1           \
	VADDSS       X1, X0, X0       \
	VUCOMISS     X0, X0           \
	JPC          label            \
	MOVL         $0x7fffffff, AX  \
	VMOVD        AX, X0           \
label:

// Zero the 32 accumulators at R8; clobbers Y0.
#define ROW_ZERO \
	VXORPS  Y0, Y0, Y0  \
	VMOVUPS Y0, 0(R8)   \
	VMOVUPS Y0, 32(R8)  \
	VMOVUPS Y0, 64(R8)  \
	VMOVUPS Y0, 96(R8)

// The section pointers of row 128(SP) at R9, the activations, the super-block count and
// index.
#define ROW_SECTIONS(low, high) \
	MOVQ 8(R14), low             \
	ADDQ R9, low                 \
	MOVQ 16(R14), high           \
	ADDQ R9, high                \
	MOVQ 24(R14), BX             \
	ADDQ R9, BX                  \
	MOVQ 32(R14), DX             \
	ADDQ R9, DX                  \
	MOVQ x+8(FP), DI             \
	MOVQ 40(R14), CX             \
	XORQ R10, R10

// Start row 128(SP) at R9: its prefetch pointer and section pointers.
#define ROW_START(low, high, label) \
	XORQ AX, AX                  \
	MOVQ 128(SP), R13            \
	CMPQ R13, 56(R14)            \
	JGE  label                   \
	MOVQ 64(R14), AX             \
	ADDQ R9, AX                  \
label:                           \
	MOVQ AX, 136(SP)             \
	ROW_SECTIONS(low, high)

// ROW_START for a form that asks for the lines each super-block of the row ahead reads (rows
// padded to a chunk hold more lines than they use): 136(SP) the distance to the row ahead, 0
// for none.
#define ROW_START_AHEAD(low, high, label) \
	XORQ AX, AX                  \
	MOVQ 128(SP), R13            \
	CMPQ R13, 56(R14)            \
	JGE  label                   \
	MOVQ 64(R14), AX             \
label:                           \
	MOVQ AX, 136(SP)             \
	ROW_SECTIONS(low, high)

// After ROW_START_AHEAD: ask for the lines q6_K super-block R10 of the row ahead reads (its
// low-plane bytes at SI, high-plane bytes at R12, scales and d field). Clobbers AX, R13.
#define Q6K_PREFETCH(skip) \
	MOVQ       136(SP), AX      \
	TESTQ      AX, AX           \
	JZ         skip             \
	PREFETCHT0 (SI)(AX*1)       \
	PREFETCHT0 64(SI)(AX*1)     \
	PREFETCHT0 (R12)(AX*1)      \
	PREFETCHT0 64(R12)(AX*1)    \
	PREFETCHT0 (BX)(AX*1)       \
	LEAQ       (DX)(R10*2), R13 \
	PREFETCHT0 (R13)(AX*1)      \
skip:

// Prefetch the row's next pfl lines (if any). Clobbers AX, R13.
#define ROW_PREFETCH(label, done) \
	MOVQ       136(SP), AX    \
	TESTQ      AX, AX         \
	JZ         done           \
	MOVQ       72(R14), R13   \
label:                        \
	PREFETCHT0 (AX)           \
	ADDQ       $64, AX        \
	DECQ       R13            \
	JNZ        label          \
	MOVQ       AX, 136(SP)    \
done:

// Store X0 as out[row], zero the accumulators, move to the next row; loop to label while rows
// remain.
#define ROW_NEXT(label) \
	MOVQ    128(SP), AX          \
	MOVQ    out+24(FP), R13      \
	VMOVSS  X0, (R13)(AX*4)      \
	ROW_ZERO                     \
	INCQ    AX                   \
	MOVQ    AX, 128(SP)          \
	ADDQ    0(R14), R9           \
	CMPQ    AX, 48(R14)          \
	JLT     label
