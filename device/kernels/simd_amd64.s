//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX2 + FMA + F16C forms of packedDotQ4K and packedDotQ6K (q4_k.go, q6_k.go): the same
// integer unit sums (exact, so any summation order gives them) and the same two or one
// fused multiply-adds per unit into the same lane accumulators, in the same order. A lane
// accumulator is one float32 of acc; super-block i's eight units are lanes 8(i mod 4) … +7,
// one ymm register's worth, so each super-block is one vector FMA step (two for q4_K).
// Register use: Y4…Y11 the eight units' partial sums, Y0…Y3 temporaries, Y12 a permutation,
// Y13…Y15 byte masks and int16 ones.

// One q4_K unit: 16 plane bytes (byte j: value j low nibble, value j+16 high nibble) times
// 32 int8 activations, as 8 int32 partial sums.
#define Q4K_UNIT(qoff, aoff, dst) \
	VMOVDQU      qoff(SI), X1        \
	VPSRLW       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y15, Y1, Y1         \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

// One q6_K unit: 16 low-plane bytes as above and 8 high-plane bytes (byte j: values j, j+8,
// j+16, j+24 in bits 0-1, 2-3, 4-5, 6-7) give the 32 unsigned quants 0…63 in value order;
// times the activations, as 8 int32 partial sums (4 for values 0-15, then 4 for 16-31). The
// low plane's 16 bytes go to both halves (broadcast), the upper half shifted right by 4 (its
// high nibbles); the high plane's 8 bytes to all four quarters, quarter k shifted left by
// 6 − 2k so that value 8k + j's two bits sit at bits 6-7 of byte j, masked (Y13 = 0xc0
// bytes) and moved to bits 4-5 (a 16-bit shift: the byte above contributes only zeros).
// Y12 = the quarters' shifts 6, 4, 2, 0; no cross-lane shuffles.
#define Q6K_UNIT(qoff, hoff, aoff, dst) \
	VBROADCASTI128 qoff(SI), Y1                 \
	VPSRLVQ        q6kLowShift<>(SB), Y1, Y1    \
	VPAND          Y15, Y1, Y1                  \
	VPBROADCASTQ   hoff(R12), Y2                \
	VPSLLVQ        Y12, Y2, Y2                  \
	VPAND          Y13, Y2, Y2                  \
	VPSRLW         $2, Y2, Y2                   \
	VPOR           Y2, Y1, Y1                   \
	VPMADDUBSW     aoff(DI), Y1, Y1             \
	VPMADDWD       Y14, Y1, dst

// Q6K_UNIT's shifts: the low plane's halves right by 0 and 4 (qwords 0, 1 and 2, 3), the high
// plane's quarters left by 6, 4, 2, 0.
DATA q6kLowShift<>+0(SB)/8, $0
DATA q6kLowShift<>+8(SB)/8, $0
DATA q6kLowShift<>+16(SB)/8, $4
DATA q6kLowShift<>+24(SB)/8, $4
GLOBL q6kLowShift<>(SB), RODATA|NOPTR, $32
DATA q6kHighShift<>+0(SB)/8, $6
DATA q6kHighShift<>+8(SB)/8, $4
DATA q6kHighShift<>+16(SB)/8, $2
DATA q6kHighShift<>+24(SB)/8, $0
GLOBL q6kHighShift<>(SB), RODATA|NOPTR, $32

// Q6K_UNIT's constants: Y15 = 0x0f bytes, Y14 = int16 ones, Y13 = 0xc0 bytes, Y12 = the high
// plane's shifts.
#define Q6K_CONSTANTS \
	CONSTANTS                          \
	MOVL         $0xc0c0c0c0, AX       \
	VMOVD        AX, X13               \
	VPBROADCASTD X13, Y13              \
	VMOVDQU      q6kHighShift<>(SB), Y12

// D = float32(fp16 at (base)(R10*2) · the q8_K block's float32 d), broadcast into dst.
#define BLOCK_SCALE(base, x, dst) \
	MOVWLZX       (base)(R10*2), AX  \
	VMOVD         AX, x              \
	VCVTPH2PS     x, x               \
	VMULSS        (DI), x, x         \
	VBROADCASTSS  x, dst

// The constants: Y15 = 0x0f bytes, Y14 = int16 ones, Y13 = 0x03 bytes.
#define CONSTANTS \
	MOVL          $0x0f0f0f0f, AX    \
	VMOVD         AX, X15            \
	VPBROADCASTD  X15, Y15           \
	MOVL          $0x00010001, AX    \
	VMOVD         AX, X14            \
	VPBROADCASTD  X14, Y14           \
	MOVL          $0x03030303, AX    \
	VMOVD         AX, X13            \
	VPBROADCASTD  X13, Y13

// Shared pieces of the K-quant and legacy loops.

// dst = base + the offset of super-block (or chunk of 8 units) R10 in a plane of 8 bytes per
// unit (two 32-unit groups interleaved per 512-byte chunk): 512⌊i/8⌋ + 128(i mod 4) +
// 8(⌊i/4⌋ mod 2); unit s is 16s further on. Clobbers AX and R13.
#define PLANE8(base, dst) \
	MOVQ R10, AX    \
	SHRQ $3, AX     \
	SHLQ $9, AX     \
	MOVQ R10, R13   \
	ANDQ $3, R13    \
	SHLQ $7, R13    \
	ADDQ R13, AX    \
	MOVQ R10, R13   \
	SHRQ $2, R13    \
	ANDQ $1, R13    \
	SHLQ $3, R13    \
	ADDQ R13, AX    \
	LEAQ (base)(AX*1), dst

// PLANE8 for a plane of 4 bytes per unit (four groups per chunk): 512⌊i/16⌋ + 128(i mod 4) +
// 4(⌊i/4⌋ mod 4).
#define PLANE4(base, dst) \
	MOVQ R10, AX    \
	SHRQ $4, AX     \
	SHLQ $9, AX     \
	MOVQ R10, R13   \
	ANDQ $3, R13    \
	SHLQ $7, R13    \
	ADDQ R13, AX    \
	MOVQ R10, R13   \
	SHRQ $2, R13    \
	ANDQ $3, R13    \
	SHLQ $2, R13    \
	ADDQ R13, AX    \
	LEAQ (base)(AX*1), dst

// The 8 units' partial sums Y4 … Y11 (8 int32 each: 4 for values 0-15, 4 for 16-31) summed
// pairwise: Y0 = [A0 A1 A2 A3 | B0 B1 B2 B3] and Y1 = [A4 … A7 | B4 … B7], A the sum over a
// unit's values 0-15 and B over 16-31. Clobbers Y2.
#define GROUP_SUMS \
	VPHADDD Y5, Y4, Y0      \
	VPHADDD Y7, Y6, Y1      \
	VPHADDD Y1, Y0, Y0      \
	VPHADDD Y9, Y8, Y1      \
	VPHADDD Y11, Y10, Y2    \
	VPHADDD Y2, Y1, Y1

// Y0 = the 8 units' whole sums S_0 … S_7 (GROUP_SUMS, then A + B). Clobbers Y1 … Y3.
#define UNIT_SUMS \
	GROUP_SUMS                      \
	VPERM2I128 $0x20, Y1, Y0, Y2    \
	VPERM2I128 $0x31, Y1, Y0, Y3    \
	VPADDD     Y3, Y2, Y0

// One q4_K super-block i = R10 of a row: SI its 128 plane bytes, BX its scales and mins, DX
// and DMIN the row's fp16 d and dmin fields, DI its q8_K activation block, R8 the 32 lane
// accumulators: per unit S = sc·Σ q·a and M = m·(bsums[2s] + bsums[2s+1]) (exact), then acc
// lanes 8(i mod 4) … +7 = fma(−Dmin, float32(M), fma(D, float32(S), acc)). Clobbers AX,
// Y0 … Y12.
#define Q4K_BLOCK(DMIN) \
	Q4K_UNIT(0, 4, Y4)             \
	Q4K_UNIT(16, 36, Y5)           \
	Q4K_UNIT(32, 68, Y6)           \
	Q4K_UNIT(48, 100, Y7)          \
	Q4K_UNIT(64, 132, Y8)          \
	Q4K_UNIT(80, 164, Y9)          \
	Q4K_UNIT(96, 196, Y10)         \
	Q4K_UNIT(112, 228, Y11)        \
	UNIT_SUMS                      \
	VPMOVZXBD    (BX), Y1          \
	VPMULLD      Y1, Y0, Y0        \
	VCVTDQ2PS    Y0, Y0            \
	VPMOVZXBD    8(BX), Y1         \
	VPMADDWD     260(DI), Y14, Y2  \
	VPMULLD      Y2, Y1, Y1        \
	VCVTDQ2PS    Y1, Y1            \
	BLOCK_SCALE(DX, X2, Y2)        \
	BLOCK_SCALE(DMIN, X3, Y3)      \
	MOVQ         R10, AX           \
	ANDQ         $3, AX            \
	SHLQ         $5, AX            \
	VMOVUPS      (R8)(AX*1), Y12   \
	VFMADD231PS  Y0, Y2, Y12       \
	VFNMADD231PS Y1, Y3, Y12       \
	VMOVUPS      Y12, (R8)(AX*1)

// func q4KDotAVX2(plane, scales, d, x *byte, blocks int, acc *[32]float32)
TEXT ·q4KDotAVX2(SB), NOSPLIT, $0-48
	MOVQ plane+0(FP), SI
	MOVQ scales+8(FP), BX
	MOVQ d+16(FP), DX
	MOVQ x+24(FP), DI
	MOVQ blocks+32(FP), CX
	MOVQ acc+40(FP), R8
	LEAQ (DX)(CX*2), R9 // the dmin fields follow the d fields
	XORQ R10, R10
	CONSTANTS
	TESTQ CX, CX
	JZ    q4kdone

q4kloop:
	Q4K_BLOCK(R9)
	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q4kloop

q4kdone:
	VZEROUPPER
	RET

// The rows form of q4_K (q4KRowsAVX2) takes the activations prepared by prepQ4KRowsAVX2,
// 320 bytes per super-block: at 64k, values 0-15 of units 2k and 2k+1; at 64k + 32, their
// values 16-31; at 256 the 16 bsums; at 288 d. Two units' plane bytes are then one 32-byte
// load whose low and high nibbles meet their activations without shuffles.

// Units 2k and 2k+1 of a q4_K super-block: the 32 plane bytes at qoff(SI) against the
// prepared activations at alo(DI) and ahi(DI), as 8 int32 partial sums in dst (4 of unit 2k,
// then 4 of 2k+1). An int16 lane sums four products of at most 15·128: no overflow.
#define Q4K_PAIR(qoff, alo, ahi, dst) \
	VMOVDQU    qoff(SI), Y1     \
	VPSRLW     $4, Y1, Y2       \
	VPAND      Y15, Y1, Y1      \
	VPAND      Y15, Y2, Y2      \
	VPMADDUBSW alo(DI), Y1, Y1  \
	VPMADDUBSW ahi(DI), Y2, Y2  \
	VPADDW     Y2, Y1, Y1       \
	VPMADDWD   Y14, Y1, dst

// One q4_K super-block of a row in the rows form, as Q4K_BLOCK but with the prepared
// activations at DI and the lane accumulators 8(i mod 4) … +7 in the register ACC: the pairs'
// sums, added horizontally to [S0 S2 S4 S6 | S1 S3 S5 S7] and put in unit order (Y13), then
// S = sc·Σ q·a, M = m·(bsums[2s] + bsums[2s+1]) and ACC = fma(−Dmin, float32(M),
// fma(D, float32(S), ACC)). R12 the row's dmin fields. Clobbers AX, Y0 … Y7.
#define Q4KR_BLOCK(ACC) \
	Q4K_PAIR(0, 0, 32, Y4)         \
	Q4K_PAIR(32, 64, 96, Y5)       \
	Q4K_PAIR(64, 128, 160, Y6)     \
	Q4K_PAIR(96, 192, 224, Y7)     \
	VPHADDD      Y5, Y4, Y0        \
	VPHADDD      Y7, Y6, Y1        \
	VPHADDD      Y1, Y0, Y0        \
	VPERMD       Y0, Y13, Y0       \
	VPMOVZXBD    (BX), Y1          \
	VPMULLD      Y1, Y0, Y0        \
	VCVTDQ2PS    Y0, Y0            \
	VPMOVZXBD    8(BX), Y1         \
	VPMADDWD     256(DI), Y14, Y2  \
	VPMULLD      Y2, Y1, Y1        \
	VCVTDQ2PS    Y1, Y1            \
	MOVWLZX      (DX)(R10*2), AX   \
	VMOVD        AX, X2            \
	VCVTPH2PS    X2, X2            \
	VMULSS       288(DI), X2, X2   \
	VBROADCASTSS X2, Y2            \
	MOVWLZX      (R12)(R10*2), AX  \
	VMOVD        AX, X3            \
	VCVTPH2PS    X3, X3            \
	VMULSS       288(DI), X3, X3   \
	VBROADCASTSS X3, Y3            \
	VFMADD231PS  Y0, Y2, ACC       \
	VFNMADD231PS Y1, Y3, ACC

// Ask the caches for the lines super-block R10 of the row ahead reads (R11 bytes on; 0:
// none): its plane bytes, scales and d and dmin fields. Clobbers R13.
#define Q4KR_PREFETCH(skip) \
	TESTQ      R11, R11           \
	JZ         skip               \
	PREFETCHT0 (SI)(R11*1)        \
	PREFETCHT0 64(SI)(R11*1)      \
	PREFETCHT0 (BX)(R11*1)        \
	LEAQ       (DX)(R10*2), R13   \
	PREFETCHT0 (R13)(R11*1)       \
	LEAQ       (R12)(R10*2), R13  \
	PREFETCHT0 (R13)(R11*1)       \
skip:

// Move to the next super-block; to done after the row's last.
#define Q4KR_NEXT(done) \
	ADDQ $128, SI  \
	ADDQ $16, BX   \
	ADDQ $320, DI  \
	INCQ R10       \
	CMPQ R10, CX   \
	JGE  done

// vpermd indices: unit order from [S0 S2 S4 S6 | S1 S3 S5 S7]
DATA q4kPairPerm<>+0(SB)/4, $0
DATA q4kPairPerm<>+4(SB)/4, $4
DATA q4kPairPerm<>+8(SB)/4, $1
DATA q4kPairPerm<>+12(SB)/4, $5
DATA q4kPairPerm<>+16(SB)/4, $2
DATA q4kPairPerm<>+20(SB)/4, $6
DATA q4kPairPerm<>+24(SB)/4, $3
DATA q4kPairPerm<>+28(SB)/4, $7
GLOBL q4kPairPerm<>(SB), RODATA|NOPTR, $32

// func q4KRowsAVX2(w, x *byte, a *rowsArgs, out *float32)
// q4KDotAVX2 for a run of rows (the rows form, rows.go), x the prepared activations. The lane
// accumulators live in Y8 … Y11 (lanes 0-7 … 24-31), four super-blocks to a round of the loop;
// the fold is ROW_FOLD's. The frame holds the row index at 0(SP); R11 the prefetch distance
// of the current row; rowsArgs at R14 as for the other rows forms (rows_amd64.h).
TEXT ·q4KRowsAVX2(SB), NOSPLIT, $8-32
	MOVQ    a+16(FP), R14
	MOVQ    w+0(FP), R9
	MOVQ    $0, 0(SP)
	CONSTANTS
	VMOVDQU q4kPairPerm<>(SB), Y13

q4krrow:
	XORQ R11, R11
	MOVQ 0(SP), R13
	CMPQ R13, 56(R14)
	JGE  q4krpfrow
	MOVQ 64(R14), R11

q4krpfrow:
	MOVQ   8(R14), SI
	ADDQ   R9, SI
	MOVQ   24(R14), BX
	ADDQ   R9, BX
	MOVQ   32(R14), DX
	ADDQ   R9, DX
	MOVQ   x+8(FP), DI
	MOVQ   40(R14), CX
	LEAQ   (DX)(CX*2), R12 // the dmin fields follow the d fields
	XORQ   R10, R10
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

q4krblock:
	Q4KR_PREFETCH(q4krpf0)
	Q4KR_BLOCK(Y8)
	Q4KR_NEXT(q4krfold)
	Q4KR_PREFETCH(q4krpf1)
	Q4KR_BLOCK(Y9)
	Q4KR_NEXT(q4krfold)
	Q4KR_PREFETCH(q4krpf2)
	Q4KR_BLOCK(Y10)
	Q4KR_NEXT(q4krfold)
	Q4KR_PREFETCH(q4krpf3)
	Q4KR_BLOCK(Y11)
	Q4KR_NEXT(q4krfold)
	JMP q4krblock

q4krfold:
	VADDPS       Y10, Y8, Y0
	VADDPS       Y11, Y9, Y1
	VADDPS       Y1, Y0, Y0
	FOLD8(q4krstore)
	MOVQ   0(SP), AX
	MOVQ   out+24(FP), R13
	VMOVSS X0, (R13)(AX*4)
	INCQ   AX
	MOVQ   AX, 0(SP)
	ADDQ   0(R14), R9
	CMPQ   AX, 48(R14)
	JLT    q4krrow
	VZEROUPPER
	RET

// Units k/32 and k/32 + 1 of the q8_K block at SI into the prepared block at DI: their values
// 0-15 at k, their values 16-31 at k + 32. Clobbers Y0 … Y3.
#define PREP_PAIR(k) \
	VMOVDQU    (4+k)(SI), Y0          \
	VMOVDQU    (36+k)(SI), Y1         \
	VPERM2I128 $0x20, Y1, Y0, Y2      \
	VPERM2I128 $0x31, Y1, Y0, Y3      \
	VMOVDQU    Y2, k(DI)              \
	VMOVDQU    Y3, (32+k)(DI)

// func prepQ4KRowsAVX2(dst, x *byte, blocks int)
// The q8_K activation row x laid out for q4KRowsAVX2 (320 bytes per super-block at dst).
TEXT ·prepQ4KRowsAVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  x+8(FP), SI
	MOVQ  blocks+16(FP), CX
	TESTQ CX, CX
	JZ    q4kprepdone

q4kprep:
	PREP_PAIR(0)
	PREP_PAIR(64)
	PREP_PAIR(128)
	PREP_PAIR(192)
	VMOVDQU    260(SI), Y0
	VMOVDQU    Y0, 256(DI)
	MOVL       (SI), AX
	MOVL       AX, 288(DI)
	ADDQ       $292, SI
	ADDQ       $320, DI
	DECQ       CX
	JNZ        q4kprep
	VZEROUPPER

q4kprepdone:
	RET

// vpermd indices: [sc0 sc2 sc4 sc6 | sc1 sc3 sc5 sc7] from [sc0 … sc7]
DATA q6kPerm<>+0(SB)/4, $0
DATA q6kPerm<>+4(SB)/4, $2
DATA q6kPerm<>+8(SB)/4, $4
DATA q6kPerm<>+12(SB)/4, $6
DATA q6kPerm<>+16(SB)/4, $1
DATA q6kPerm<>+20(SB)/4, $3
DATA q6kPerm<>+24(SB)/4, $5
DATA q6kPerm<>+28(SB)/4, $7
GLOBL q6kPerm<>(SB), RODATA|NOPTR, $32

// One q6_K super-block i = R10 of a row: SI its 128 low-plane bytes, R11 the row's high plane
// (8 bytes per unit, two 32-unit groups interleaved in each 512-byte chunk: unit s of
// super-block i at 512⌊i/8⌋ + 128(i mod 4) + 8(⌊i/4⌋ mod 2) + 16s), BX its 16 scales, DX the
// row's fp16 d fields, DI its q8_K activation block, R8 the 32 lane accumulators. After
// GROUP_SUMS, Y0 = [A0 A1 A2 A3 | B0 B1 B2 B3] and Y1 = [A4 … A7 | B4 … B7] (A: values 0-15
// of unit s, scale sc_2s; B: values 16-31, scale sc_2s+1); the scales, permuted to match,
// give Σ sc·Σ q·a per unit, less 32·(sc_2s·bsums[2s] + sc_2s+1·bsums[2s+1]) for the −32: S,
// exact; then acc lanes 8(i mod 4) … +7 = fma(D, float32(S), acc). Clobbers AX, R12, R13,
// Y0 … Y11.
#define Q6K_BLOCK \
	PLANE8(R11, R12)              \
	Q6K_BODY

// Q6K_BLOCK after PLANE8 (R12 the super-block's high-plane bytes).
#define Q6K_BODY \
	Q6K_UNIT(0, 0, 4, Y4)         \
	Q6K_UNIT(16, 16, 36, Y5)      \
	Q6K_UNIT(32, 32, 68, Y6)      \
	Q6K_UNIT(48, 48, 100, Y7)     \
	Q6K_UNIT(64, 64, 132, Y8)     \
	Q6K_UNIT(80, 80, 164, Y9)     \
	Q6K_UNIT(96, 96, 196, Y10)    \
	Q6K_UNIT(112, 112, 228, Y11)  \
	GROUP_SUMS                    \
	VMOVDQU    q6kPerm<>(SB), Y3  \
	VPMOVSXBD  (BX), Y2           \
	VPERMD     Y2, Y3, Y2         \
	VPMULLD    Y2, Y0, Y0         \
	VPMOVSXBD  8(BX), Y2          \
	VPERMD     Y2, Y3, Y2         \
	VPMULLD    Y2, Y1, Y1         \
	VPERM2I128 $0x20, Y1, Y0, Y2  \
	VPERM2I128 $0x31, Y1, Y0, Y3  \
	VPADDD     Y3, Y2, Y0         \
	VPMOVSXBW  (BX), Y1           \
	VPMADDWD   260(DI), Y1, Y1    \
	VPSLLD     $5, Y1, Y1         \
	VPSUBD     Y1, Y0, Y0         \
	VCVTDQ2PS  Y0, Y0             \
	BLOCK_SCALE(DX, X2, Y2)       \
	MOVQ        R10, AX           \
	ANDQ        $3, AX            \
	SHLQ        $5, AX            \
	VMOVUPS     (R8)(AX*1), Y3    \
	VFMADD231PS Y0, Y2, Y3        \
	VMOVUPS     Y3, (R8)(AX*1)

// func q6KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)
TEXT ·q6KDotAVX2(SB), NOSPLIT, $0-56
	MOVQ low+0(FP), SI
	MOVQ high+8(FP), R11
	MOVQ scales+16(FP), BX
	MOVQ d+24(FP), DX
	MOVQ x+32(FP), DI
	MOVQ blocks+40(FP), CX
	MOVQ acc+48(FP), R8
	XORQ R10, R10
	Q6K_CONSTANTS
	TESTQ CX, CX
	JZ    q6kdone

q6kloop:
	Q6K_BLOCK
	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q6kloop

q6kdone:
	VZEROUPPER
	RET

// func q6KRowsAVX2(w, x *byte, a *rowsArgs, out *float32)
// q6KDotAVX2 for a run of rows (the rows form, rows.go): out[r] = the lane fold of row r's
// accumulators, the rows read in order.
TEXT ·q6KRowsAVX2(SB), NOSPLIT, $144-32
	MOVQ a+16(FP), R14
	MOVQ w+0(FP), R9
	LEAQ 0(SP), R8
	MOVQ $0, 128(SP)
	Q6K_CONSTANTS
	ROW_ZERO

q6krrow:
	ROW_START_AHEAD(SI, R11, q6krpfrow)

q6krblock:
	PLANE8(R11, R12)
	Q6K_PREFETCH(q6krpf)
	Q6K_BODY
	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q6krblock

	ROW_FOLD(q6krfold)
	ROW_NEXT(q6krrow)
	VZEROUPPER
	RET

// The float formats (f32.go, f16.go, bf16.go): a unit is 4 float32 or 8 16-bit values, folded
// value by value into its lane, so a vector of lanes needs the units' values transposed.
// A chunk of 8 units is loaded as four registers of two units each and transposed within
// the 128-bit halves, which leaves each vector of one value position holding the units in
// the order 0 2 4 6 1 3 5 7: the accumulators keep that order (the Go side undoes it).
// Chunk c's lanes are 8(c mod 4) … +7.

// Y0 … Y3 = the four value positions of the f32 chunk at P; clobbers Y4 … Y7.
#define F32_CHUNK(P) \
	VMOVUPS   0(P), Y0     \
	VMOVUPS   32(P), Y1    \
	VMOVUPS   64(P), Y2    \
	VMOVUPS   96(P), Y3    \
	VUNPCKLPS Y1, Y0, Y4   \
	VUNPCKHPS Y1, Y0, Y5   \
	VUNPCKLPS Y3, Y2, Y6   \
	VUNPCKHPS Y3, Y2, Y7   \
	VUNPCKLPD Y6, Y4, Y0   \
	VUNPCKHPD Y6, Y4, Y1   \
	VUNPCKLPD Y7, Y5, Y2   \
	VUNPCKHPD Y7, Y5, Y3

// func dotF32AVX2(w, x *float32, chunks int, acc *[32]float32)
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ chunks+16(FP), CX
	MOVQ acc+24(FP), R8
	XORQ R10, R10
	TESTQ CX, CX
	JZ   f32done

f32loop:
	F32_CHUNK(SI)
	VMOVAPS Y0, Y8
	VMOVAPS Y1, Y9
	VMOVAPS Y2, Y10
	VMOVAPS Y3, Y11
	F32_CHUNK(DI)
	MOVQ        R10, AX
	ANDQ        $3, AX
	SHLQ        $5, AX
	VMOVUPS     (R8)(AX*1), Y12
	VFMADD231PS Y0, Y8, Y12
	VFMADD231PS Y1, Y9, Y12
	VFMADD231PS Y2, Y10, Y12
	VFMADD231PS Y3, Y11, Y12
	VMOVUPS     Y12, (R8)(AX*1)
	ADDQ $128, SI
	ADDQ $128, DI
	INCQ R10
	CMPQ R10, CX
	JLT  f32loop

f32done:
	VZEROUPPER
	RET

// Y0 … Y3 = the 16-bit values of the chunk at P (8 units of 8), value positions 2k in the
// low half of Yk and 2k+1 in the high half; clobbers Y4 … Y7.
#define H16_CHUNK(P) \
	VMOVDQU    0(P), Y0    \
	VMOVDQU    32(P), Y1   \
	VMOVDQU    64(P), Y2   \
	VMOVDQU    96(P), Y3   \
	VPUNPCKLWD Y1, Y0, Y4  \
	VPUNPCKHWD Y1, Y0, Y5  \
	VPUNPCKLWD Y3, Y2, Y6  \
	VPUNPCKHWD Y3, Y2, Y7  \
	VPUNPCKLDQ Y6, Y4, Y0  \
	VPUNPCKHDQ Y6, Y4, Y1  \
	VPUNPCKLDQ Y7, Y5, Y2  \
	VPUNPCKHDQ Y7, Y5, Y3  \
	VPERMQ     $0xd8, Y0, Y0 \
	VPERMQ     $0xd8, Y1, Y1 \
	VPERMQ     $0xd8, Y2, Y2 \
	VPERMQ     $0xd8, Y3, Y3

// f16 → float32 (exact)
#define CVT_F16(x, y) VCVTPH2PS x, y
// bf16 → float32: the bits shifted up 16 (exact)
#define CVT_BF16(x, y) VPMOVZXWD x, y; VPSLLD $16, y, y

// Fold value positions 2k (low halves of WY and VY) and 2k+1 (high halves) into Y0; WX and
// VX name the low halves.
#define H16_STEP(WX, WY, VX, VY, CVT) \
	CVT(WX, Y1)                \
	CVT(VX, Y2)                \
	VFMADD231PS  Y2, Y1, Y0    \
	VEXTRACTI128 $1, WY, X3    \
	VEXTRACTI128 $1, VY, X4    \
	CVT(X3, Y1)                \
	CVT(X4, Y2)                \
	VFMADD231PS  Y2, Y1, Y0

// One chunk of a 16-bit dot product: SI the weights, DI the activations, R10 the chunk index.
#define H16_DOT_CHUNK(CVT) \
	H16_CHUNK(SI)             \
	VMOVDQA Y0, Y8            \
	VMOVDQA Y1, Y9            \
	VMOVDQA Y2, Y10           \
	VMOVDQA Y3, Y11           \
	H16_CHUNK(DI)             \
	VMOVDQA Y0, Y12           \
	VMOVDQA Y1, Y13           \
	VMOVDQA Y2, Y14           \
	VMOVDQA Y3, Y15           \
	MOVQ    R10, AX           \
	ANDQ    $3, AX            \
	SHLQ    $5, AX            \
	VMOVUPS (R8)(AX*1), Y0    \
	H16_STEP(X8, Y8, X12, Y12, CVT)   \
	H16_STEP(X9, Y9, X13, Y13, CVT)   \
	H16_STEP(X10, Y10, X14, Y14, CVT) \
	H16_STEP(X11, Y11, X15, Y15, CVT) \
	VMOVUPS Y0, (R8)(AX*1)

// func dotF16AVX2(w, x *byte, chunks int, acc *[32]float32)
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ chunks+16(FP), CX
	MOVQ acc+24(FP), R8
	XORQ R10, R10
	TESTQ CX, CX
	JZ   f16done

f16loop:
	H16_DOT_CHUNK(CVT_F16)
	ADDQ $128, SI
	ADDQ $128, DI
	INCQ R10
	CMPQ R10, CX
	JLT  f16loop

f16done:
	VZEROUPPER
	RET

// func dotBF16AVX2(w, x *byte, chunks int, acc *[32]float32)
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ chunks+16(FP), CX
	MOVQ acc+24(FP), R8
	XORQ R10, R10
	TESTQ CX, CX
	JZ   bf16done

bf16loop:
	H16_DOT_CHUNK(CVT_BF16)
	ADDQ $128, SI
	ADDQ $128, DI
	INCQ R10
	CMPQ R10, CX
	JLT  bf16loop

bf16done:
	VZEROUPPER
	RET

// func warpTotalAVX(v *[32]float32) float32
// num.WarpTotal's butterfly with vector adds (the same pairs): lanes l and l+16, then l+8,
// l+4, l+2, l+1. The caller makes a NaN canonical.
TEXT ·warpTotalAVX(SB), NOSPLIT, $0-12
	MOVQ         v+0(FP), SI
	VMOVUPS      0(SI), Y0
	VMOVUPS      32(SI), Y1
	VADDPS       64(SI), Y0, Y0
	VADDPS       96(SI), Y1, Y1
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+8(FP)
	RET

// One q8_0 unit (block): 16 + 16 plane bytes (the second half 512 bytes on) times the 32
// activation quants at aoff, sign-extended to int16 (exact for every byte, −128 included),
// as 8 int32 partial sums.
#define Q8_0_UNIT(qoff, aoff, dst) \
	VPMOVSXBW qoff(SI), Y1         \
	VPMOVSXBW aoff(DI), Y2         \
	VPMADDWD  Y2, Y1, Y1           \
	VPMOVSXBW (qoff+512)(SI), Y2   \
	VPMOVSXBW (aoff+16)(DI), Y3    \
	VPMADDWD  Y3, Y2, Y2           \
	VPADDD    Y2, Y1, dst

// The legacy formats' fold of a chunk of 8 units (q8_0, q4_0): Y4 … Y11 the units' partial
// sums, DI the activation blocks (fp16 d first, 34 bytes each), DX the weights' fp16 d of the
// chunk, R10 the chunk index, R8 the accumulators: acc = fma(float32(S), d_w·d_x, acc).
#define LEGACY_FOLD \
	UNIT_SUMS \
	VCVTDQ2PS  Y0, Y0 \
	MOVWLZX   0(DI), AX \
	VMOVD     AX, X1 \
	VPINSRW   $1, 34(DI), X1, X1 \
	VPINSRW   $2, 68(DI), X1, X1 \
	VPINSRW   $3, 102(DI), X1, X1 \
	VPINSRW   $4, 136(DI), X1, X1 \
	VPINSRW   $5, 170(DI), X1, X1 \
	VPINSRW   $6, 204(DI), X1, X1 \
	VPINSRW   $7, 238(DI), X1, X1 \
	VCVTPH2PS X1, Y1 \
	VCVTPH2PS (DX), Y2 \
	VMULPS    Y2, Y1, Y1 \
	MOVQ        R10, AX \
	ANDQ        $3, AX \
	SHLQ        $5, AX \
	VMOVUPS     (R8)(AX*1), Y3 \
	VFMADD231PS Y1, Y0, Y3 \
	VMOVUPS     Y3, (R8)(AX*1)

// func q80DotAVX2(plane, d, x *byte, chunks int, acc *[32]float32)
// Chunks of 8 units; unit u's activation block is 34 bytes at 34u (fp16 d, 32 int8).
TEXT ·q80DotAVX2(SB), NOSPLIT, $0-40
	MOVQ plane+0(FP), R11
	MOVQ d+8(FP), DX
	MOVQ x+16(FP), DI
	MOVQ chunks+24(FP), CX
	MOVQ acc+32(FP), R8
	XORQ R10, R10
	TESTQ CX, CX
	JZ   q80done

q80loop:
	// the plane bytes of units 8c … 8c+7: 1024⌊c/4⌋ + 128(c mod 4) (first halves)
	MOVQ R10, AX
	SHRQ $2, AX
	SHLQ $10, AX
	MOVQ R10, R13
	ANDQ $3, R13
	SHLQ $7, R13
	ADDQ R13, AX
	LEAQ (R11)(AX*1), SI

	Q8_0_UNIT(0, 2, Y4)
	Q8_0_UNIT(16, 36, Y5)
	Q8_0_UNIT(32, 70, Y6)
	Q8_0_UNIT(48, 104, Y7)
	Q8_0_UNIT(64, 138, Y8)
	Q8_0_UNIT(80, 172, Y9)
	Q8_0_UNIT(96, 206, Y10)
	Q8_0_UNIT(112, 240, Y11)

	LEGACY_FOLD

	ADDQ $16, DX
	ADDQ $272, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q80loop

q80done:
	VZEROUPPER
	RET

// q5_K: one unit's 32 unsigned quants 0…31 are q4_K's nibbles plus a fifth bit from 4
// high-plane bytes, value l's in byte l mod 4 at bit ⌊l/4⌋: broadcast the 4 bytes, keep bit
// ⌊l/4⌋ in byte l (Y12 holds 1 << ⌊l/4⌋), and turn a set bit into 16 (Y13 = 0x10 bytes).
DATA q5kBits<>+0(SB)/8, $0x0202020201010101
DATA q5kBits<>+8(SB)/8, $0x0808080804040404
DATA q5kBits<>+16(SB)/8, $0x2020202010101010
DATA q5kBits<>+24(SB)/8, $0x8080808040404040
GLOBL q5kBits<>(SB), RODATA|NOPTR, $32

#define Q5K_UNIT(qoff, hoff, aoff, dst) \
	VMOVDQU      qoff(SI), X1        \
	VPSRLW       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y15, Y1, Y1         \
	VPBROADCASTD hoff(R12), Y2       \
	VPAND        Y12, Y2, Y2         \
	VPCMPEQB     Y12, Y2, Y2         \
	VPAND        Y13, Y2, Y2         \
	VPOR         Y2, Y1, Y1          \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

// func q5KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)
TEXT ·q5KDotAVX2(SB), NOSPLIT, $0-56
	MOVQ low+0(FP), SI
	MOVQ high+8(FP), R11
	MOVQ scales+16(FP), BX
	MOVQ d+24(FP), DX
	MOVQ x+32(FP), DI
	MOVQ blocks+40(FP), CX
	MOVQ acc+48(FP), R8
	LEAQ (DX)(CX*2), R9 // the dmin fields follow the d fields
	XORQ R10, R10
	CONSTANTS
	VMOVDQU q5kBits<>(SB), Y12
	MOVL    $0x10101010, AX
	VMOVD   AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ    q5kdone

q5kloop:
	// The high plane (4 bytes per unit) interleaves four 32-unit groups in each 512-byte
	// chunk: unit s of super-block i is at 512⌊i/16⌋ + 128(i mod 4) + 4(⌊i/4⌋ mod 4) + 16s.
	PLANE4(R11, R12)

	Q5K_UNIT(0, 0, 4, Y4)
	Q5K_UNIT(16, 16, 36, Y5)
	Q5K_UNIT(32, 32, 68, Y6)
	Q5K_UNIT(48, 48, 100, Y7)
	Q5K_UNIT(64, 64, 132, Y8)
	Q5K_UNIT(80, 80, 164, Y9)
	Q5K_UNIT(96, 96, 196, Y10)
	Q5K_UNIT(112, 112, 228, Y11)

	UNIT_SUMS

	VPMOVZXBD (BX), Y1
	VPMULLD   Y1, Y0, Y0
	VCVTDQ2PS Y0, Y0
	VPMOVZXBD 8(BX), Y1
	VPMADDWD  260(DI), Y14, Y2
	VPMULLD   Y2, Y1, Y1
	VCVTDQ2PS Y1, Y1

	BLOCK_SCALE(DX, X2, Y2)
	BLOCK_SCALE(R9, X3, Y3)

	MOVQ         R10, AX
	ANDQ         $3, AX
	SHLQ         $5, AX
	VMOVUPS      (R8)(AX*1), Y4
	VFMADD231PS  Y0, Y2, Y4
	VFNMADD231PS Y1, Y3, Y4
	VMOVUPS      Y4, (R8)(AX*1)

	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q5kloop

q5kdone:
	VZEROUPPER
	RET

// func prefetchAVX(p *byte, n int)
// Asks the caches for the n bytes at p (one PREFETCHT0 per 64-byte line).
TEXT ·prefetchAVX(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*1), CX
pfloop:
	CMPQ SI, CX
	JGE  pfdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	JMP  pfloop
pfdone:
	RET

// Attention (attention.go). Scores: 8 keys at a time, each key's dot product a chain of
// fused multiply-adds over the head's dimensions in order, as in attendHead; the 8 keys' rows
// are loaded 8 dimensions at a time and transposed so that one vector FMA advances all 8
// chains by one dimension.

// ATT_LOAD8 loads dimensions d0 … d0+7 of the 8 keys whose float32 offsets are at BX (kc + 4·d0
// in R8) into Y0 … Y7. Clobbers AX.
#define ATT_LOAD8 \
	MOVQ    0(BX), AX        \
	VMOVUPS (R8)(AX*4), Y0   \
	MOVQ    8(BX), AX        \
	VMOVUPS (R8)(AX*4), Y1   \
	MOVQ    16(BX), AX       \
	VMOVUPS (R8)(AX*4), Y2   \
	MOVQ    24(BX), AX       \
	VMOVUPS (R8)(AX*4), Y3   \
	MOVQ    32(BX), AX       \
	VMOVUPS (R8)(AX*4), Y4   \
	MOVQ    40(BX), AX       \
	VMOVUPS (R8)(AX*4), Y5   \
	MOVQ    48(BX), AX       \
	VMOVUPS (R8)(AX*4), Y6   \
	MOVQ    56(BX), AX       \
	VMOVUPS (R8)(AX*4), Y7

// ATT_TRANSPOSE8 transposes Y0 … Y7 (key i's 8 dimensions in Yi) within Y0 … Y11: afterwards
// Y8, Y9, Y10, Y11, Y0, Y1, Y2, Y3 hold dimension 0 … 7 of the 8 keys; Y4 … Y7 are free.
#define ATT_TRANSPOSE8 \
	VUNPCKLPS  Y1, Y0, Y8        \
	VUNPCKHPS  Y1, Y0, Y9        \
	VUNPCKLPS  Y3, Y2, Y10       \
	VUNPCKHPS  Y3, Y2, Y11       \
	VSHUFPS    $0x44, Y10, Y8, Y0 \
	VSHUFPS    $0xee, Y10, Y8, Y1 \
	VSHUFPS    $0x44, Y11, Y9, Y2 \
	VSHUFPS    $0xee, Y11, Y9, Y3 \
	VUNPCKLPS  Y5, Y4, Y8        \
	VUNPCKHPS  Y5, Y4, Y9        \
	VUNPCKLPS  Y7, Y6, Y10       \
	VUNPCKHPS  Y7, Y6, Y11       \
	VSHUFPS    $0x44, Y10, Y8, Y4 \
	VSHUFPS    $0xee, Y10, Y8, Y5 \
	VSHUFPS    $0x44, Y11, Y9, Y6 \
	VSHUFPS    $0xee, Y11, Y9, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y0 \
	VPERM2F128 $0x31, Y5, Y1, Y1 \
	VPERM2F128 $0x31, Y6, Y2, Y2 \
	VPERM2F128 $0x31, Y7, Y3, Y3

// ATT_CANON sets the NaN lanes of r to the canonical NaN (in nan); clobbers tmp.
#define ATT_CANON(r, nan, tmp) \
	VCMPPS    $3, r, r, tmp \
	VBLENDVPS tmp, nan, r, r

// func attnScoresAVX2(e, q, kc *float32, offs *int64, groups, hd int, scale float32)
// e[8g+i] = float32(dot(q, kc[offs[8g+i]:][:hd])·scale) for g < groups, i < 8 (hd a
// multiple of 8).
TEXT ·attnScoresAVX2(SB), NOSPLIT, $0-52
	MOVQ e+0(FP), DI
	MOVQ q+8(FP), R11
	MOVQ kc+16(FP), R12
	MOVQ offs+24(FP), BX
	MOVQ groups+32(FP), CX
	MOVQ hd+40(FP), R13
	VBROADCASTSS scale+48(FP), Y13
	TESTQ CX, CX
	JZ    scdone

scgroup:
	VXORPS Y15, Y15, Y15
	MOVQ   R12, R8  // kc + 4·d0
	MOVQ   R11, SI  // q + 4·d0
	MOVQ   R13, R9  // dimensions left

scblock:
	ATT_LOAD8
	ATT_TRANSPOSE8 // Y8 … Y11, Y0 … Y3 = dimensions d0 … d0+7 of the 8 keys

	VBROADCASTSS 0(SI), Y14
	VFMADD231PS  Y8, Y14, Y15
	VBROADCASTSS 4(SI), Y14
	VFMADD231PS  Y9, Y14, Y15
	VBROADCASTSS 8(SI), Y14
	VFMADD231PS  Y10, Y14, Y15
	VBROADCASTSS 12(SI), Y14
	VFMADD231PS  Y11, Y14, Y15
	VBROADCASTSS 16(SI), Y14
	VFMADD231PS  Y0, Y14, Y15
	VBROADCASTSS 20(SI), Y14
	VFMADD231PS  Y1, Y14, Y15
	VBROADCASTSS 24(SI), Y14
	VFMADD231PS  Y2, Y14, Y15
	VBROADCASTSS 28(SI), Y14
	VFMADD231PS  Y3, Y14, Y15

	ADDQ $32, R8
	ADDQ $32, SI
	SUBQ $8, R9
	JGT  scblock

	VMULPS  Y13, Y15, Y15
	VMOVUPS Y15, (DI)
	ADDQ    $32, DI
	ADDQ    $64, BX
	DECQ    CX
	JNZ     scgroup

scdone:
	VZEROUPPER
	RET

// func attnScores4AVX2(e *float32, es int, q *float32, qs int, kc *float32, offs *int64, groups, hd int, scale float32)
// attnScoresAVX2 for four query heads that share their keys (a group of grouped-query
// attention): head h's query at q[h·qs:] and its scores at e[h·es:]. Each group of 8 keys is
// loaded and transposed once for the four heads, whose four chains of fused multiply-adds
// (each over the dimensions in order, as in attendHead) run side by side.
TEXT ·attnScores4AVX2(SB), NOSPLIT, $0-68
	MOVQ  e+0(FP), DI
	MOVQ  es+8(FP), R10
	SHLQ  $2, R10
	MOVQ  q+16(FP), R11
	MOVQ  qs+24(FP), R14
	SHLQ  $2, R14
	MOVQ  kc+32(FP), R12
	MOVQ  offs+40(FP), BX
	MOVQ  groups+48(FP), CX
	MOVQ  hd+56(FP), R13
	TESTQ CX, CX
	JZ    s4done

s4group:
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	MOVQ   R12, R8  // kc + 4·d0
	MOVQ   R11, SI  // q + 4·d0 (head 0)
	MOVQ   R13, R9  // dimensions left

s4block:
	ATT_LOAD8
	ATT_TRANSPOSE8 // Y8 … Y11, Y0 … Y3 = dimensions d0 … d0+7 of the 8 keys

	LEAQ (SI)(R14*2), AX // q + 4·d0 (head 2)
	VBROADCASTSS 0(SI), Y4
	VBROADCASTSS 0(SI)(R14*1), Y5
	VBROADCASTSS 0(AX), Y6
	VBROADCASTSS 0(AX)(R14*1), Y7
	VFMADD231PS  Y8, Y4, Y12
	VFMADD231PS  Y8, Y5, Y13
	VFMADD231PS  Y8, Y6, Y14
	VFMADD231PS  Y8, Y7, Y15
	VBROADCASTSS 4(SI), Y4
	VBROADCASTSS 4(SI)(R14*1), Y5
	VBROADCASTSS 4(AX), Y6
	VBROADCASTSS 4(AX)(R14*1), Y7
	VFMADD231PS  Y9, Y4, Y12
	VFMADD231PS  Y9, Y5, Y13
	VFMADD231PS  Y9, Y6, Y14
	VFMADD231PS  Y9, Y7, Y15
	VBROADCASTSS 8(SI), Y4
	VBROADCASTSS 8(SI)(R14*1), Y5
	VBROADCASTSS 8(AX), Y6
	VBROADCASTSS 8(AX)(R14*1), Y7
	VFMADD231PS  Y10, Y4, Y12
	VFMADD231PS  Y10, Y5, Y13
	VFMADD231PS  Y10, Y6, Y14
	VFMADD231PS  Y10, Y7, Y15
	VBROADCASTSS 12(SI), Y4
	VBROADCASTSS 12(SI)(R14*1), Y5
	VBROADCASTSS 12(AX), Y6
	VBROADCASTSS 12(AX)(R14*1), Y7
	VFMADD231PS  Y11, Y4, Y12
	VFMADD231PS  Y11, Y5, Y13
	VFMADD231PS  Y11, Y6, Y14
	VFMADD231PS  Y11, Y7, Y15
	VBROADCASTSS 16(SI), Y4
	VBROADCASTSS 16(SI)(R14*1), Y5
	VBROADCASTSS 16(AX), Y6
	VBROADCASTSS 16(AX)(R14*1), Y7
	VFMADD231PS  Y0, Y4, Y12
	VFMADD231PS  Y0, Y5, Y13
	VFMADD231PS  Y0, Y6, Y14
	VFMADD231PS  Y0, Y7, Y15
	VBROADCASTSS 20(SI), Y4
	VBROADCASTSS 20(SI)(R14*1), Y5
	VBROADCASTSS 20(AX), Y6
	VBROADCASTSS 20(AX)(R14*1), Y7
	VFMADD231PS  Y1, Y4, Y12
	VFMADD231PS  Y1, Y5, Y13
	VFMADD231PS  Y1, Y6, Y14
	VFMADD231PS  Y1, Y7, Y15
	VBROADCASTSS 24(SI), Y4
	VBROADCASTSS 24(SI)(R14*1), Y5
	VBROADCASTSS 24(AX), Y6
	VBROADCASTSS 24(AX)(R14*1), Y7
	VFMADD231PS  Y2, Y4, Y12
	VFMADD231PS  Y2, Y5, Y13
	VFMADD231PS  Y2, Y6, Y14
	VFMADD231PS  Y2, Y7, Y15
	VBROADCASTSS 28(SI), Y4
	VBROADCASTSS 28(SI)(R14*1), Y5
	VBROADCASTSS 28(AX), Y6
	VBROADCASTSS 28(AX)(R14*1), Y7
	VFMADD231PS  Y3, Y4, Y12
	VFMADD231PS  Y3, Y5, Y13
	VFMADD231PS  Y3, Y6, Y14
	VFMADD231PS  Y3, Y7, Y15

	ADDQ $32, R8
	ADDQ $32, SI
	SUBQ $8, R9
	JGT  s4block

	VBROADCASTSS scale+64(FP), Y4
	VMULPS       Y4, Y12, Y12
	VMULPS       Y4, Y13, Y13
	VMULPS       Y4, Y14, Y14
	VMULPS       Y4, Y15, Y15
	VMOVUPS      Y12, (DI)
	VMOVUPS      Y13, (DI)(R10*1)
	LEAQ         (DI)(R10*2), AX
	VMOVUPS      Y14, (AX)
	VMOVUPS      Y15, (AX)(R10*1)
	ADDQ         $32, DI
	ADDQ         $64, BX
	DECQ         CX
	JNZ          s4group

s4done:
	VZEROUPPER
	RET

// func attnPV32AVX2(out, e, vc *float32, offs *int64, n int)
// out[0:32] = Σ_j e[j]·vc[offs[j]:][0:32], each dimension a chain of fused multiply-adds over
// j in order from +0, as in attendHead; a NaN sum is stored as the canonical NaN.
TEXT ·attnPV32AVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ e+8(FP), SI
	MOVQ vc+16(FP), R8
	MOVQ offs+24(FP), BX
	MOVQ n+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ    pvstore

pvloop:
	MOVQ         (BX), AX
	LEAQ         (R8)(AX*4), AX
	VBROADCASTSS (SI), Y4
	VFMADD231PS  0(AX), Y4, Y0
	VFMADD231PS  32(AX), Y4, Y1
	VFMADD231PS  64(AX), Y4, Y2
	VFMADD231PS  96(AX), Y4, Y3
	ADDQ         $8, BX
	ADDQ         $4, SI
	DECQ         CX
	JNZ          pvloop

pvstore: // NaN sums as the canonical NaN
	VMOVUPS   expTab<>+512(SB), Y5
	ATT_CANON(Y0, Y5, Y6)
	ATT_CANON(Y1, Y5, Y6)
	ATT_CANON(Y2, Y5, Y6)
	ATT_CANON(Y3, Y5, Y6)
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// func attnPV32x2AVX2(out *float32, os int, e *float32, es int, vc *float32, offs *int64, n int)
// attnPV32AVX2 for two query heads that share their values: head h's weights at e[h·es:] and
// its sums at out[h·os:]. Each value row is loaded once for both heads.
TEXT ·attnPV32x2AVX2(SB), NOSPLIT, $0-56
	MOVQ   out+0(FP), DI
	MOVQ   os+8(FP), DX
	SHLQ   $2, DX
	MOVQ   e+16(FP), SI
	MOVQ   es+24(FP), R10
	SHLQ   $2, R10
	MOVQ   vc+32(FP), R8
	MOVQ   offs+40(FP), BX
	MOVQ   n+48(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	TESTQ  CX, CX
	JZ     pv2store

pv2loop:
	MOVQ         (BX), AX
	LEAQ         (R8)(AX*4), AX
	VMOVUPS      0(AX), Y10
	VMOVUPS      32(AX), Y11
	VMOVUPS      64(AX), Y12
	VMOVUPS      96(AX), Y13
	VBROADCASTSS (SI), Y4
	VBROADCASTSS (SI)(R10*1), Y9
	VFMADD231PS  Y10, Y4, Y0
	VFMADD231PS  Y11, Y4, Y1
	VFMADD231PS  Y12, Y4, Y2
	VFMADD231PS  Y13, Y4, Y3
	VFMADD231PS  Y10, Y9, Y5
	VFMADD231PS  Y11, Y9, Y6
	VFMADD231PS  Y12, Y9, Y7
	VFMADD231PS  Y13, Y9, Y8
	ADDQ         $8, BX
	ADDQ         $4, SI
	DECQ         CX
	JNZ          pv2loop

pv2store: // NaN sums as the canonical NaN
	VMOVUPS   expTab<>+512(SB), Y4
	ATT_CANON(Y0, Y4, Y10)
	ATT_CANON(Y1, Y4, Y10)
	ATT_CANON(Y2, Y4, Y10)
	ATT_CANON(Y3, Y4, Y10)
	ATT_CANON(Y5, Y4, Y10)
	ATT_CANON(Y6, Y4, Y10)
	ATT_CANON(Y7, Y4, Y10)
	ATT_CANON(Y8, Y4, Y10)
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    DX, DI
	VMOVUPS Y5, 0(DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y7, 64(DI)
	VMOVUPS Y8, 96(DI)
	VZEROUPPER
	RET

// Exp32 (device/num/exp.go) for 8 values at a time: the same IEEE float32 operations in the
// same order, special inputs blended in as Exp32 handles them. Each constant of num's Exp32
// (the same bit patterns) and of its special cases is repeated 8 times, 32 bytes apart.
#define EXP_LOG2E expTab<>+0(SB)
#define EXP_SHIFT expTab<>+32(SB)
#define EXP_LN2HI expTab<>+64(SB)
#define EXP_LN2LO expTab<>+96(SB)
#define EXP_C7 expTab<>+128(SB)
#define EXP_C6 expTab<>+160(SB)
#define EXP_C5 expTab<>+192(SB)
#define EXP_C4 expTab<>+224(SB)
#define EXP_C3 expTab<>+256(SB)
#define EXP_C2 expTab<>+288(SB)
#define EXP_ONE expTab<>+320(SB)
#define EXP_HALF expTab<>+352(SB)
#define EXP_BIAS expTab<>+384(SB)
#define EXP_NEG128 expTab<>+416(SB)
#define EXP_POS128 expTab<>+448(SB)
#define EXP_INF expTab<>+480(SB)
#define EXP_NAN expTab<>+512(SB)
#define EXP_SIGN expTab<>+544(SB)
DATA expTab<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expTab<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expTab<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expTab<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA expTab<>+32(SB)/8, $0x4b4000004b400000
DATA expTab<>+40(SB)/8, $0x4b4000004b400000
DATA expTab<>+48(SB)/8, $0x4b4000004b400000
DATA expTab<>+56(SB)/8, $0x4b4000004b400000
DATA expTab<>+64(SB)/8, $0x3f3172183f317218
DATA expTab<>+72(SB)/8, $0x3f3172183f317218
DATA expTab<>+80(SB)/8, $0x3f3172183f317218
DATA expTab<>+88(SB)/8, $0x3f3172183f317218
DATA expTab<>+96(SB)/8, $0xb102e308b102e308
DATA expTab<>+104(SB)/8, $0xb102e308b102e308
DATA expTab<>+112(SB)/8, $0xb102e308b102e308
DATA expTab<>+120(SB)/8, $0xb102e308b102e308
DATA expTab<>+128(SB)/8, $0x394efdd4394efdd4
DATA expTab<>+136(SB)/8, $0x394efdd4394efdd4
DATA expTab<>+144(SB)/8, $0x394efdd4394efdd4
DATA expTab<>+152(SB)/8, $0x394efdd4394efdd4
DATA expTab<>+160(SB)/8, $0x3ab6a65e3ab6a65e
DATA expTab<>+168(SB)/8, $0x3ab6a65e3ab6a65e
DATA expTab<>+176(SB)/8, $0x3ab6a65e3ab6a65e
DATA expTab<>+184(SB)/8, $0x3ab6a65e3ab6a65e
DATA expTab<>+192(SB)/8, $0x3c0889873c088987
DATA expTab<>+200(SB)/8, $0x3c0889873c088987
DATA expTab<>+208(SB)/8, $0x3c0889873c088987
DATA expTab<>+216(SB)/8, $0x3c0889873c088987
DATA expTab<>+224(SB)/8, $0x3d2aaa743d2aaa74
DATA expTab<>+232(SB)/8, $0x3d2aaa743d2aaa74
DATA expTab<>+240(SB)/8, $0x3d2aaa743d2aaa74
DATA expTab<>+248(SB)/8, $0x3d2aaa743d2aaa74
DATA expTab<>+256(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expTab<>+264(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expTab<>+272(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expTab<>+280(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA expTab<>+288(SB)/8, $0x3f0000003f000000
DATA expTab<>+296(SB)/8, $0x3f0000003f000000
DATA expTab<>+304(SB)/8, $0x3f0000003f000000
DATA expTab<>+312(SB)/8, $0x3f0000003f000000
DATA expTab<>+320(SB)/8, $0x3f8000003f800000
DATA expTab<>+328(SB)/8, $0x3f8000003f800000
DATA expTab<>+336(SB)/8, $0x3f8000003f800000
DATA expTab<>+344(SB)/8, $0x3f8000003f800000
DATA expTab<>+352(SB)/8, $0x3f0000003f000000
DATA expTab<>+360(SB)/8, $0x3f0000003f000000
DATA expTab<>+368(SB)/8, $0x3f0000003f000000
DATA expTab<>+376(SB)/8, $0x3f0000003f000000
DATA expTab<>+384(SB)/8, $0x0000007f0000007f
DATA expTab<>+392(SB)/8, $0x0000007f0000007f
DATA expTab<>+400(SB)/8, $0x0000007f0000007f
DATA expTab<>+408(SB)/8, $0x0000007f0000007f
DATA expTab<>+416(SB)/8, $0xc3000000c3000000
DATA expTab<>+424(SB)/8, $0xc3000000c3000000
DATA expTab<>+432(SB)/8, $0xc3000000c3000000
DATA expTab<>+440(SB)/8, $0xc3000000c3000000
DATA expTab<>+448(SB)/8, $0x4300000043000000
DATA expTab<>+456(SB)/8, $0x4300000043000000
DATA expTab<>+464(SB)/8, $0x4300000043000000
DATA expTab<>+472(SB)/8, $0x4300000043000000
DATA expTab<>+480(SB)/8, $0x7f8000007f800000
DATA expTab<>+488(SB)/8, $0x7f8000007f800000
DATA expTab<>+496(SB)/8, $0x7f8000007f800000
DATA expTab<>+504(SB)/8, $0x7f8000007f800000
DATA expTab<>+512(SB)/8, $0x7fffffff7fffffff
DATA expTab<>+520(SB)/8, $0x7fffffff7fffffff
DATA expTab<>+528(SB)/8, $0x7fffffff7fffffff
DATA expTab<>+536(SB)/8, $0x7fffffff7fffffff
DATA expTab<>+544(SB)/8, $0x8000000080000000
DATA expTab<>+552(SB)/8, $0x8000000080000000
DATA expTab<>+560(SB)/8, $0x8000000080000000
DATA expTab<>+568(SB)/8, $0x8000000080000000
GLOBL expTab<>(SB), RODATA|NOPTR, $576

// num's expCore on Y0: Y10 = hi, Y11 = lo, Y2 = j (int32); clobbers Y1 … Y12.
#define EXPCORE_Y0 \
	VMOVUPS      EXP_SHIFT, Y1         \
	VFMADD231PS  EXP_LOG2E, Y0, Y1     \
	VSUBPS       EXP_SHIFT, Y1, Y1     \
	VCVTTPS2DQ   Y1, Y2                \
	VMOVAPS      Y0, Y3                \
	VFNMADD231PS EXP_LN2HI, Y1, Y3     \
	VMOVAPS      Y3, Y4                \
	VFNMADD231PS EXP_LN2LO, Y1, Y4     \
	VSUBPS       Y4, Y3, Y5            \
	VFNMADD231PS EXP_LN2LO, Y1, Y5     \
	VMULPS       Y4, Y4, Y6            \
	VMOVAPS      Y6, Y7                \
	VFMSUB231PS  Y4, Y4, Y7            \
	VMOVUPS      EXP_C6, Y8            \
	VFMADD231PS  EXP_C7, Y4, Y8        \
	VFMADD213PS  EXP_C5, Y4, Y8        \
	VFMADD213PS  EXP_C4, Y4, Y8        \
	VFMADD213PS  EXP_C3, Y4, Y8        \
	VFMADD213PS  EXP_C2, Y4, Y8        \
	VMOVAPS      Y5, Y9                \
	VFMADD231PS  Y4, Y5, Y9            \
	VFMADD231PS  EXP_HALF, Y7, Y9      \
	VFMADD231PS  Y8, Y6, Y9            \
	VADDPS       EXP_ONE, Y4, Y10      \
	VSUBPS       EXP_ONE, Y10, Y11     \
	VSUBPS       Y11, Y4, Y11          \
	VADDPS       Y9, Y11, Y11          \
	VADDPS       Y11, Y10, Y12         \
	VSUBPS       Y12, Y10, Y10         \
	VADDPS       Y11, Y10, Y11         \
	VMOVAPS      Y12, Y10

// p1 = 2^(j>>1), p2 = 2^(j−(j>>1)) as float32 bits from int32 j (num's scale: q·p1·p2); p2 may
// be j's register.
#define POW2_SPLIT(j, p1, p2) \
	VPSRAD $1, j, p1          \
	VPSUBD p1, j, p2          \
	VPADDD EXP_BIAS, p1, p1   \
	VPSLLD $23, p1, p1        \
	VPADDD EXP_BIAS, p2, p2   \
	VPSLLD $23, p2, p2

// Y10 = Exp32(Y0); clobbers Y1 … Y12.
#define EXP32_Y0 \
	EXPCORE_Y0                         \
	POW2_SPLIT(Y2, Y3, Y2)             \
	VMULPS       Y3, Y10, Y10          \
	VMULPS       Y2, Y10, Y10          \
	VCMPPS       $0x11, EXP_NEG128, Y0, Y12 \
	VANDNPS      Y10, Y12, Y10         \
	VMOVUPS      EXP_INF, Y11          \
	VCMPPS       $0x1e, EXP_POS128, Y0, Y12 \
	VBLENDVPS    Y12, Y11, Y10, Y10    \
	VMOVUPS      EXP_NAN, Y11          \
	VCMPPS       $3, Y0, Y0, Y12       \
	VBLENDVPS    Y12, Y11, Y10, Y10

// func exp32ShiftAVX2(e *float32, n int, m float32)
// e[i] = Exp32(e[i] − m) for i < n, n a multiple of 8.
TEXT ·exp32ShiftAVX2(SB), NOSPLIT, $0-20
	MOVQ         e+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y13
	SHRQ         $3, CX
	JZ           expdone

exploop:
	VMOVUPS (DI), Y0
	VSUBPS  Y13, Y0, Y0
	EXP32_Y0
	VMOVUPS Y10, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     exploop

expdone:
	VZEROUPPER
	RET



// num.expNeg(−|x|) for the 8 values x in Y13, as SiLU32 and Sigmoid32 begin: Y10, Y11 hi and
// lo, Y4, Y5 the two factors of 2^j (POW2_SPLIT), Y9 q = 1/D, Y12 c, Y14 zero. Clobbers Y0 … Y8.
#define EXPNEG_Y13 \
	VXORPS    EXP_SIGN, Y13, Y0 \
	VXORPS    Y14, Y14, Y14 \
	VCMPPS    $0x11, Y14, Y13, Y1 \
	VBLENDVPS Y1, Y13, Y0, Y0 \
	EXPCORE_Y0 \
	POW2_SPLIT(Y2, Y4, Y5) \
	VMULPS       Y4, Y10, Y3 \
	VMULPS       Y5, Y3, Y3 \
	VMULPS       Y4, Y11, Y6 \
	VMULPS       Y5, Y6, Y6 \
	VADDPS       EXP_ONE, Y3, Y7 \
	VSUBPS       EXP_ONE, Y7, Y8 \
	VSUBPS       Y8, Y3, Y8 \
	VADDPS       Y6, Y8, Y8 \
	VMOVUPS      EXP_ONE, Y9 \
	VDIVPS       Y7, Y9, Y9 \
	VMOVUPS      EXP_ONE, Y12 \
	VFNMADD231PS Y7, Y9, Y12 \
	VFNMADD231PS Y8, Y9, Y12 \
	VMULPS       Y12, Y9, Y12

// func siluMulAVX2(y, a, b *float32, n int)
// y[i] = Canon(SiLU32(a[i])·b[i]) for i < n, n a multiple of 8: num.SiLU32's operations in
// order (expNeg, the reciprocal and its correction, the two signs' formulas, the scaling),
// special inputs blended in as SiLU32 handles them.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   siludone

siluloop:
	VMOVUPS (SI), Y13
	EXPNEG_Y13
	// x ≥ 0: fma(x, q, x·c)
	VMULPS      Y12, Y13, Y1
	VFMADD231PS Y9, Y13, Y1
	// x < 0: wh = hi·q, wl = fma(hi, q, −wh) + fma(hi, c, lo·q), scale(fma(x, wh, x·wl), j)
	VMULPS      Y9, Y10, Y2
	VMOVAPS     Y2, Y3
	VFMSUB231PS Y9, Y10, Y3
	VMULPS      Y9, Y11, Y6
	VFMADD231PS Y12, Y10, Y6
	VADDPS      Y6, Y3, Y3
	VMULPS      Y3, Y13, Y6
	VFMADD231PS Y2, Y13, Y6
	VMULPS      Y4, Y6, Y6
	VMULPS      Y5, Y6, Y6
	VCMPPS      $0x1d, Y14, Y13, Y7
	VBLENDVPS   Y7, Y1, Y6, Y6
	// x > 128: x; x < −128: −0; NaN: NaN
	VCMPPS    $0x1e, EXP_POS128, Y13, Y7
	VBLENDVPS Y7, Y13, Y6, Y6
	VMOVUPS   EXP_SIGN, Y8
	VCMPPS    $0x11, EXP_NEG128, Y13, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	VMOVUPS   EXP_NAN, Y8
	VCMPPS    $3, Y13, Y13, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	// ·b, the canonical NaN
	VMULPS    (DX), Y6, Y6
	VCMPPS    $3, Y6, Y6, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	VMOVUPS   Y6, (DI)

	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  siluloop

siludone:
	VZEROUPPER
	RET

// One q4_0 unit: 16 plane bytes (byte j: value j low nibble, value j+16 high nibble, q − 8)
// times 32 activation quants: Σ q·a − 8·Σ a in int16 pairs (|·| ≤ 5888), as 8 int32 sums.
#define Q4_0_UNIT(qoff, aoff, dst) \
	VMOVDQU      qoff(SI), X1        \
	VPSRLW       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y15, Y1, Y1         \
	VMOVDQU      aoff(DI), Y2        \
	VPMADDUBSW   Y2, Y1, Y1          \
	VPMADDUBSW   Y2, Y13, Y2         \
	VPSUBW       Y2, Y1, Y1          \
	VPMADDWD     Y14, Y1, dst

// func q40DotAVX2(plane, d, x *byte, chunks int, acc *[32]float32)
// Chunks of 8 units; the plane holds unit u's 16 bytes at 16u.
TEXT ·q40DotAVX2(SB), NOSPLIT, $0-40
	MOVQ plane+0(FP), SI
	MOVQ d+8(FP), DX
	MOVQ x+16(FP), DI
	MOVQ chunks+24(FP), CX
	MOVQ acc+32(FP), R8
	XORQ R10, R10
	CONSTANTS
	MOVL $0x08080808, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ   q40done

q40loop:
	Q4_0_UNIT(0, 2, Y4)
	Q4_0_UNIT(16, 36, Y5)
	Q4_0_UNIT(32, 70, Y6)
	Q4_0_UNIT(48, 104, Y7)
	Q4_0_UNIT(64, 138, Y8)
	Q4_0_UNIT(80, 172, Y9)
	Q4_0_UNIT(96, 206, Y10)
	Q4_0_UNIT(112, 240, Y11)
	LEGACY_FOLD
	ADDQ $128, SI
	ADDQ $16, DX
	ADDQ $272, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q40loop

q40done:
	VZEROUPPER
	RET

// q3_K: a unit's 32 unsigned quants u = r | hbit<<2 (0…7; q = u − 4) are q6_K's 2-bit
// arrangement (8 low-plane bytes) plus q5_K's bit arrangement (4 hmask bytes) giving 4. Then
// S = Σ_g (sc_g − 32)·(Σ u·a − 4·bsums[g]) over the unit's two groups, as q6_K's with the
// scales' bias and the offset 4.
DATA q3kC<>+0(SB)/8, $0x0404040404040404
DATA q3kC<>+8(SB)/8, $0x0404040404040404
DATA q3kC<>+16(SB)/8, $0x0404040404040404
DATA q3kC<>+24(SB)/8, $0x0404040404040404
DATA q3kC<>+32(SB)/8, $0x0000002000000020
DATA q3kC<>+40(SB)/8, $0x0000002000000020
DATA q3kC<>+48(SB)/8, $0x0000002000000020
DATA q3kC<>+56(SB)/8, $0x0000002000000020
DATA q3kC<>+64(SB)/8, $0x0020002000200020
DATA q3kC<>+72(SB)/8, $0x0020002000200020
DATA q3kC<>+80(SB)/8, $0x0020002000200020
DATA q3kC<>+88(SB)/8, $0x0020002000200020
GLOBL q3kC<>(SB), RODATA|NOPTR, $96
#define Q3K_FOURS q3kC<>+0(SB)
#define Q3K_32D q3kC<>+32(SB)
#define Q3K_32W q3kC<>+64(SB)

#define Q3K_UNIT(loff, hoff, aoff, dst) \
	VMOVQ        loff(R12), X1       \
	VPSRLQ       $2, X1, X2          \
	VPUNPCKLQDQ  X2, X1, X1          \
	VPSRLQ       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y13, Y1, Y1         \
	VPBROADCASTD hoff(R9), Y2        \
	VPAND        Y15, Y2, Y2         \
	VPCMPEQB     Y15, Y2, Y2         \
	VPAND        Q3K_FOURS, Y2, Y2   \
	VPOR         Y2, Y1, Y1          \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

// func q3KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)
TEXT ·q3KDotAVX2(SB), NOSPLIT, $0-56
	MOVQ low+0(FP), SI
	MOVQ high+8(FP), R11
	MOVQ scales+16(FP), BX
	MOVQ d+24(FP), DX
	MOVQ x+32(FP), DI
	MOVQ blocks+40(FP), CX
	MOVQ acc+48(FP), R8
	XORQ R10, R10
	CONSTANTS
	VMOVDQU q6kPerm<>(SB), Y12
	VMOVDQU q5kBits<>(SB), Y15
	TESTQ CX, CX
	JZ    q3kdone

q3kloop:
	// low plane (8 bytes per unit): 512⌊i/8⌋ + 128(i mod 4) + 8(⌊i/4⌋ mod 2) + 16s
	PLANE8(SI, R12)
	// hmask plane (4 bytes per unit): 512⌊i/16⌋ + 128(i mod 4) + 4(⌊i/4⌋ mod 4) + 16s
	PLANE4(R11, R9)

	Q3K_UNIT(0, 0, 4, Y4)
	Q3K_UNIT(16, 16, 36, Y5)
	Q3K_UNIT(32, 32, 68, Y6)
	Q3K_UNIT(48, 48, 100, Y7)
	Q3K_UNIT(64, 64, 132, Y8)
	Q3K_UNIT(80, 80, 164, Y9)
	Q3K_UNIT(96, 96, 196, Y10)
	Q3K_UNIT(112, 112, 228, Y11)

	GROUP_SUMS

	VPMOVZXBD  (BX), Y2     // sc_0 … sc_7 − 32
	VPSUBD     Q3K_32D, Y2, Y2
	VPERMD     Y2, Y12, Y2
	VPMULLD    Y2, Y0, Y0
	VPMOVZXBD  8(BX), Y2    // sc_8 … sc_15 − 32
	VPSUBD     Q3K_32D, Y2, Y2
	VPERMD     Y2, Y12, Y2
	VPMULLD    Y2, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	VPADDD     Y3, Y2, Y0   // Σ (sc − 32)·Σ u·a per unit

	VPMOVZXBW (BX), Y1
	VPSUBW    Q3K_32W, Y1, Y1
	VPMADDWD  260(DI), Y1, Y1 // Σ (sc − 32)·bsums per unit
	VPSLLD    $2, Y1, Y1
	VPSUBD    Y1, Y0, Y0
	VCVTDQ2PS Y0, Y0

	BLOCK_SCALE(DX, X2, Y2)

	MOVQ        R10, AX
	ANDQ        $3, AX
	SHLQ        $5, AX
	VMOVUPS     (R8)(AX*1), Y3
	VFMADD231PS Y0, Y2, Y3
	VMOVUPS     Y3, (R8)(AX*1)

	ADDQ $16, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q3kloop

q3kdone:
	VZEROUPPER
	RET

// q2_K: a unit's 32 quants 0…3 are q3_K's 2-bit arrangement (8 plane bytes);
// S = Σ_g sc_g·Σ q·a over the unit's two groups (q6_K's group sums), M = Σ_g m_g·bsums[g];
// acc = fma(D, S, acc), then fma(−Dmin, M, acc), as q4_K. The block's scale bytes are the 16
// scales then the 16 mins.
#define Q2K_UNIT(loff, aoff, dst) \
	VMOVQ        loff(R12), X1       \
	VPSRLQ       $2, X1, X2          \
	VPUNPCKLQDQ  X2, X1, X1          \
	VPSRLQ       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y13, Y1, Y1         \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

// func q2KDotAVX2(plane, scales, d, x *byte, blocks int, acc *[32]float32)
TEXT ·q2KDotAVX2(SB), NOSPLIT, $0-48
	MOVQ plane+0(FP), SI
	MOVQ scales+8(FP), BX
	MOVQ d+16(FP), DX
	MOVQ x+24(FP), DI
	MOVQ blocks+32(FP), CX
	MOVQ acc+40(FP), R8
	LEAQ (DX)(CX*2), R9 // the dmin fields follow the d fields
	XORQ R10, R10
	CONSTANTS
	VMOVDQU q6kPerm<>(SB), Y12
	TESTQ CX, CX
	JZ    q2kdone

q2kloop:
	// plane (8 bytes per unit): 512⌊i/8⌋ + 128(i mod 4) + 8(⌊i/4⌋ mod 2) + 16s
	PLANE8(SI, R12)

	Q2K_UNIT(0, 4, Y4)
	Q2K_UNIT(16, 36, Y5)
	Q2K_UNIT(32, 68, Y6)
	Q2K_UNIT(48, 100, Y7)
	Q2K_UNIT(64, 132, Y8)
	Q2K_UNIT(80, 164, Y9)
	Q2K_UNIT(96, 196, Y10)
	Q2K_UNIT(112, 228, Y11)

	GROUP_SUMS

	VPMOVZXBD  (BX), Y2     // sc_0 … sc_7
	VPERMD     Y2, Y12, Y2
	VPMULLD    Y2, Y0, Y0
	VPMOVZXBD  8(BX), Y2    // sc_8 … sc_15
	VPERMD     Y2, Y12, Y2
	VPMULLD    Y2, Y1, Y1
	VPERM2I128 $0x20, Y1, Y0, Y2
	VPERM2I128 $0x31, Y1, Y0, Y3
	VPADDD     Y3, Y2, Y0   // S per unit
	VCVTDQ2PS  Y0, Y0

	VPMOVZXBW 16(BX), Y1    // m_0 … m_15
	VPMADDWD  260(DI), Y1, Y1 // M per unit
	VCVTDQ2PS Y1, Y1

	BLOCK_SCALE(DX, X2, Y2) // D
	BLOCK_SCALE(R9, X3, Y3) // Dmin

	MOVQ         R10, AX
	ANDQ         $3, AX
	SHLQ         $5, AX
	VMOVUPS      (R8)(AX*1), Y4
	VFMADD231PS  Y0, Y2, Y4
	VFNMADD231PS Y1, Y3, Y4
	VMOVUPS      Y4, (R8)(AX*1)

	ADDQ $32, BX
	ADDQ $292, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q2kloop

q2kdone:
	VZEROUPPER
	RET

// Several activation rows at once (a prefill chunk's or a tree's columns): q4_K's dot product
// for ncols columns, each with exactly the one-column steps, the weight row's units unpacked
// once per super-block. Y0 … Y7 hold the super-block's 8 unpacked units, Y14 and Y15 its
// scales and mins; each column's units are summed pairwise as they come (VPHADDD, the same
// pairs as the one-column form).
DATA q4kNC<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4kNC<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4kNC<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4kNC<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4kNC<>+32(SB)/8, $0x0001000100010001
DATA q4kNC<>+40(SB)/8, $0x0001000100010001
DATA q4kNC<>+48(SB)/8, $0x0001000100010001
DATA q4kNC<>+56(SB)/8, $0x0001000100010001
GLOBL q4kNC<>(SB), RODATA|NOPTR, $64
// The several-column forms' ways to their unit sums (multiForm in simd_amd64.go).
#define FORM_PLAIN 0
#define FORM_VNNI 1
#define FORM_TRANSPOSED 2

#define NC_NIBBLES q4kNC<>+0(SB)
#define NC_ONES q4kNC<>+32(SB)

// unpack the q4_K unit at qoff(SI) into dst (32 quants in value order); clobbers Y8.
#define Q4K_UNPACK(qoff, dst) \
	VMOVDQU      qoff(SI), X8        \
	VPSRLW       $4, X8, X9          \
	VINSERTI128  $1, X9, Y8, dst     \
	VPAND        NC_NIBBLES, dst, dst

// dst = 8 int32 partial sums of unit q times the activations at aoff(DI).
#define NC_UNIT(q, aoff, dst) \
	VPMADDUBSW aoff(DI), q, dst   \
	VPMADDWD   NC_ONES, dst, dst

// dst = the same 8 int32 partial sums with one AVX-512 VNNI dot-product instruction (u8 × s8,
// four products per int32, no intermediate saturation: the sums are exact either way).
#define NC_UNIT_VNNI(q, aoff, dst) \
	VPXOR    dst, dst, dst        \
	VPDPBUSD aoff(DI), q, dst

// The 8 units of a column, summed pairwise: Y11 = units 0-3, Y12 = units 4-7 (VPHADDD of
// VPHADDD, as the one-column form). UNIT is NC_UNIT or NC_UNIT_VNNI.
#define NC_COLUMN_SUMS(UNIT) \
	UNIT(Y0, 4, Y9)          \
	UNIT(Y1, 36, Y10)        \
	VPHADDD Y10, Y9, Y11     \
	UNIT(Y2, 68, Y9)         \
	UNIT(Y3, 100, Y10)       \
	VPHADDD Y10, Y9, Y12     \
	VPHADDD Y12, Y11, Y11    \
	UNIT(Y4, 132, Y9)        \
	UNIT(Y5, 164, Y10)       \
	VPHADDD Y10, Y9, Y12     \
	UNIT(Y6, 196, Y9)        \
	UNIT(Y7, 228, Y10)       \
	VPHADDD Y10, Y9, Y13     \
	VPHADDD Y13, Y12, Y12

// Y_dst |= 16 where q5_K's fifth bit of the unit's value is set: its 4 high-plane bytes at
// hoff(R8) (q5K_UNIT's arrangement); clobbers Y8.
#define Q5K_HIGH(hoff, dst) \
	VPBROADCASTD hoff(R8), Y8           \
	VPAND        q5kBits<>(SB), Y8, Y8  \
	VPCMPEQB     q5kBits<>(SB), Y8, Y8  \
	VPAND        q45kNC<>(SB), Y8, Y8   \
	VPOR         Y8, dst, dst

DATA q45kNC<>+0(SB)/8, $0x1010101010101010
DATA q45kNC<>+8(SB)/8, $0x1010101010101010
DATA q45kNC<>+16(SB)/8, $0x1010101010101010
DATA q45kNC<>+24(SB)/8, $0x1010101010101010
GLOBL q45kNC<>(SB), RODATA|NOPTR, $32

// vpshufb indices: the 16 scales of a q6_K super-block as [even | odd]
DATA q6kEvenOdd<>+0(SB)/8, $0x0e0c0a0806040200
DATA q6kEvenOdd<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL q6kEvenOdd<>(SB), RODATA|NOPTR, $16

// The 8 × 8 dword transpose of Y0 … Y7 (unit u in Y_u) into Y0 … Y7 (Y_k's dword lane L: unit
// L's bytes 4k … 4k+3, the layout transposeQ8K gives the activations); clobbers Y8 … Y15.
#define TRANSPOSE_UNITS \
	VPERM2I128  $0x20, Y4, Y0, Y8  \
	VPERM2I128  $0x31, Y4, Y0, Y9  \
	VPERM2I128  $0x20, Y5, Y1, Y10 \
	VPERM2I128  $0x31, Y5, Y1, Y11 \
	VPERM2I128  $0x20, Y6, Y2, Y12 \
	VPERM2I128  $0x31, Y6, Y2, Y13 \
	VPERM2I128  $0x20, Y7, Y3, Y14 \
	VPERM2I128  $0x31, Y7, Y3, Y15 \
	VPUNPCKLDQ  Y10, Y8, Y0        \
	VPUNPCKHDQ  Y10, Y8, Y1        \
	VPUNPCKLDQ  Y14, Y12, Y2       \
	VPUNPCKHDQ  Y14, Y12, Y3       \
	VPUNPCKLQDQ Y2, Y0, Y8         \
	VPUNPCKHQDQ Y2, Y0, Y10        \
	VPUNPCKLQDQ Y3, Y1, Y12        \
	VPUNPCKHQDQ Y3, Y1, Y14        \
	VPUNPCKLDQ  Y11, Y9, Y0        \
	VPUNPCKHDQ  Y11, Y9, Y1        \
	VPUNPCKLDQ  Y15, Y13, Y2       \
	VPUNPCKHDQ  Y15, Y13, Y3       \
	VPUNPCKLQDQ Y2, Y0, Y4         \
	VPUNPCKHQDQ Y2, Y0, Y5         \
	VPUNPCKLQDQ Y3, Y1, Y6         \
	VPUNPCKHQDQ Y3, Y1, Y7         \
	VMOVDQU     Y8, Y0             \
	VMOVDQU     Y10, Y1            \
	VMOVDQU     Y12, Y2            \
	VMOVDQU     Y14, Y3

// func q45KDotNAVX2(plane, high, scales, d, x *byte, xstride, ncols, blocks int, acc *float32, form uint8)
// q4_K's several-column form, and q5_K's with high (its plane of fifth bits) not nil: the two
// share their scales, mins and steps. acc: ncols × 32 float32 lane accumulators, column c at
// acc[32c:]. The form (multiForm) says how a column's 8 unit sums Σ q·a reach lanes 0 … 7:
//   - plain: each unit's VPMADDUBSW and VPMADDWD leave its sum spread over 8 lanes, which
//     horizontal adds gather (NC_COLUMN_SUMS);
//   - VNNI (a CPU with AVX-512 VNNI and VL): the same with VPDPBUSD;
//   - transposed: the activations are transposeQ8K's and the units are transposed the same way
//     once a super-block (TRANSPOSE_UNITS), so that Y_k's lane L holds unit L's quants
//     4k … 4k+3; VPMADDUBSW's 16-bit results are summed in 16 bits four at a time (each at most
//     2·31·128 = 7 936, four 31 744: exact) and widened twice, with no horizontal add.
// The sums are the same integers every way, and the rest is common, so the bits are too.
TEXT ·q45KDotNAVX2(SB), NOSPLIT, $64-73
	MOVQ plane+0(FP), SI
	MOVQ scales+16(FP), BX
	MOVQ d+24(FP), DX
	MOVQ blocks+56(FP), CX
	LEAQ (DX)(CX*2), R9 // the dmin fields follow the d fields
	XORQ R10, R10
	TESTQ CX, CX
	JZ    q4kndone

q4knblock:
	Q4K_UNPACK(0, Y0)
	Q4K_UNPACK(16, Y1)
	Q4K_UNPACK(32, Y2)
	Q4K_UNPACK(48, Y3)
	Q4K_UNPACK(64, Y4)
	Q4K_UNPACK(80, Y5)
	Q4K_UNPACK(96, Y6)
	Q4K_UNPACK(112, Y7)
	MOVQ  high+8(FP), R8
	TESTQ R8, R8
	JZ    q4knunpacked
	PLANE4(R8, R8)
	Q5K_HIGH(0, Y0)
	Q5K_HIGH(16, Y1)
	Q5K_HIGH(32, Y2)
	Q5K_HIGH(48, Y3)
	Q5K_HIGH(64, Y4)
	Q5K_HIGH(80, Y5)
	Q5K_HIGH(96, Y6)
	Q5K_HIGH(112, Y7)

q4knunpacked:
	CMPB form+72(FP), $FORM_TRANSPOSED
	JNE  q4knscales
	TRANSPOSE_UNITS

q4knscales:
	VPMOVZXBD    (BX), Y14 // sc_0 … sc_7
	VPMOVZXBD    8(BX), Y15 // m_0 … m_7
	MOVWLZX      (DX)(R10*2), AX
	VMOVD        AX, X8
	VCVTPH2PS    X8, X8
	VBROADCASTSS X8, Y8
	VMOVUPS      Y8, 0(SP) // d_w, every lane
	MOVWLZX      (R9)(R10*2), AX
	VMOVD        AX, X8
	VCVTPH2PS    X8, X8
	VBROADCASTSS X8, Y8
	VMOVUPS      Y8, 32(SP) // dmin_w, every lane

	// column loop: DI = x + 292·i + c·xstride, R12 = acc + 128c + 32(i mod 4)
	IMUL3Q $292, R10, DI
	ADDQ  x+32(FP), DI
	MOVQ  R10, R12
	ANDQ  $3, R12
	SHLQ  $5, R12
	ADDQ  acc+64(FP), R12
	MOVQ  ncols+48(FP), R11
	CMPB  form+72(FP), $FORM_TRANSPOSED
	JEQ   q4kntcols

q4kncol:
	CMPB form+72(FP), $FORM_VNNI
	JEQ  q4kncolvnni
	NC_COLUMN_SUMS(NC_UNIT)
	JMP  q4kncolsums

q4kncolvnni:
	NC_COLUMN_SUMS(NC_UNIT_VNNI)

q4kncolsums:
	VPERM2I128 $0x20, Y12, Y11, Y9
	VPERM2I128 $0x31, Y12, Y11, Y10
	VPADDD     Y10, Y9, Y9
	VPMULLD    Y14, Y9, Y9
	VCVTDQ2PS  Y9, Y9        // float32(sc·Σ q·a)
	VMOVDQU    NC_ONES, Y11
	VPMADDWD   260(DI), Y11, Y11
	VPMULLD    Y15, Y11, Y11
	VCVTDQ2PS  Y11, Y11      // float32(m·B)
	VMOVSS       0(SP), X12
	VMULSS       (DI), X12, X12
	VBROADCASTSS X12, Y12   // D
	VMOVSS       32(SP), X13
	VMULSS       (DI), X13, X13
	VBROADCASTSS X13, Y13   // Dmin
	VMOVUPS      (R12), Y10
	VFMADD231PS  Y9, Y12, Y10
	VFNMADD231PS Y11, Y13, Y10
	VMOVUPS      Y10, (R12)

	ADDQ xstride+40(FP), DI
	ADDQ $128, R12
	DECQ R11
	JNZ  q4kncol
	JMP  q4knnext

	// the transposed form's column loop: Y8 = int16 ones, D and Dmin as vector products
	// (d_w·d_x and dmin_w·d_x in every lane: the scalar products' bits)
q4kntcols:
	VMOVDQU NC_ONES, Y8

q4kntcol:
	VPMADDUBSW 4(DI), Y0, Y9
	VPMADDUBSW 36(DI), Y1, Y10
	VPADDW     Y10, Y9, Y9
	VPMADDUBSW 68(DI), Y2, Y10
	VPADDW     Y10, Y9, Y9
	VPMADDUBSW 100(DI), Y3, Y10
	VPADDW     Y10, Y9, Y9
	VPMADDWD   Y8, Y9, Y9
	VPMADDUBSW 132(DI), Y4, Y10
	VPMADDUBSW 164(DI), Y5, Y11
	VPADDW     Y11, Y10, Y10
	VPMADDUBSW 196(DI), Y6, Y11
	VPADDW     Y11, Y10, Y10
	VPMADDUBSW 228(DI), Y7, Y11
	VPADDW     Y11, Y10, Y10
	VPMADDWD   Y8, Y10, Y10
	VPADDD     Y10, Y9, Y9 // lane L: unit L's Σ q·a
	VPMULLD    Y14, Y9, Y9
	VCVTDQ2PS  Y9, Y9      // float32(sc·Σ q·a)
	VPMADDWD   260(DI), Y8, Y11
	VPMULLD    Y15, Y11, Y11
	VCVTDQ2PS  Y11, Y11    // float32(m·B)
	VBROADCASTSS (DI), Y12
	VMULPS       32(SP), Y12, Y13 // Dmin
	VMULPS       0(SP), Y12, Y12  // D
	VMOVUPS      (R12), Y10
	VFMADD231PS  Y9, Y12, Y10
	VFNMADD231PS Y11, Y13, Y10
	VMOVUPS      Y10, (R12)

	ADDQ xstride+40(FP), DI
	ADDQ $128, R12
	DECQ R11
	JNZ  q4kntcol

q4knnext:
	ADDQ $128, SI
	ADDQ $16, BX
	INCQ R10
	CMPQ R10, CX
	JLT  q4knblock

q4kndone:
	VZEROUPPER
	RET



// q6_K's several-column form: the super-block's 8 units unpacked once (Y0 … Y7, quants 0…63
// in value order), its permuted scales in Y14 and Y15 and its 16 scales as int16 on the stack;
// each column then as q6KDotAVX2. q6kNC: 0xc0 bytes (Q6K_UNIT's Y13).
DATA q6kNC<>+0(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA q6kNC<>+8(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA q6kNC<>+16(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA q6kNC<>+24(SB)/8, $0xc0c0c0c0c0c0c0c0
GLOBL q6kNC<>(SB), RODATA|NOPTR, $32

// unpack the q6_K unit at qoff(SI) (low plane) and hoff(R12) (high plane) into dst as
// Q6K_UNIT does; clobbers Y8, Y9.
#define Q6K_UNPACK(qoff, hoff, dst) \
	VBROADCASTI128 qoff(SI), Y8                   \
	VPSRLVQ        q6kLowShift<>(SB), Y8, Y8      \
	VPAND          NC_NIBBLES, Y8, Y8             \
	VPBROADCASTQ   hoff(R12), Y9                  \
	VPSLLVQ        q6kHighShift<>(SB), Y9, Y9     \
	VPAND          q6kNC<>(SB), Y9, Y9            \
	VPSRLW         $2, Y9, Y9                     \
	VPOR           Y9, Y8, dst

// func q6KDotNAVX2(low, high, scales, d, x *byte, xstride, ncols, blocks int, acc *float32, form uint8)
// The forms as q45KDotNAVX2's. Transposed, Y_0 … Y_3 hold every unit's quants 0-15 (its even
// sub-block) and Y_4 … Y_7 its quants 16-31 (the odd one); a sub-block's Σ q·a is two pairs
// of VPMADDUBSW summed in 16 bits (each at most 2·63·128 = 16 128, a pair 32 256: exact) and
// widened, and lane L of the even sums times the even scales plus the odd's is unit L's
// Σ sc·Σ q·a, as the other forms have it.
TEXT ·q6KDotNAVX2(SB), NOSPLIT, $64-73
	MOVQ low+0(FP), SI
	MOVQ high+8(FP), R11
	MOVQ scales+16(FP), BX
	MOVQ d+24(FP), DX
	MOVQ blocks+56(FP), CX
	XORQ R10, R10
	TESTQ CX, CX
	JZ    q6kndone

q6knblock:
	// high plane of super-block i: 512⌊i/8⌋ + 128(i mod 4) + 8(⌊i/4⌋ mod 2)
	PLANE8(R11, R12)

	Q6K_UNPACK(0, 0, Y0)
	Q6K_UNPACK(16, 16, Y1)
	Q6K_UNPACK(32, 32, Y2)
	Q6K_UNPACK(48, 48, Y3)
	Q6K_UNPACK(64, 64, Y4)
	Q6K_UNPACK(80, 80, Y5)
	Q6K_UNPACK(96, 96, Y6)
	Q6K_UNPACK(112, 112, Y7)
	CMPB form+72(FP), $FORM_TRANSPOSED
	JEQ  q6kntransposed
	VMOVDQU   q6kPerm<>(SB), Y8
	VPMOVSXBD (BX), Y14
	VPERMD    Y14, Y8, Y14  // [sc0 sc2 sc4 sc6 | sc1 sc3 sc5 sc7]
	VPMOVSXBD 8(BX), Y15
	VPERMD    Y15, Y8, Y15  // [sc8 sc10 sc12 sc14 | sc9 sc11 sc13 sc15]
	JMP       q6knscales

q6kntransposed:
	TRANSPOSE_UNITS
	VMOVDQU   (BX), X8
	VPSHUFB   q6kEvenOdd<>(SB), X8, X8
	VPMOVSXBD X8, Y14       // [sc0 sc2 … sc14]
	VPSRLDQ   $8, X8, X8
	VPMOVSXBD X8, Y15       // [sc1 sc3 … sc15]

q6knscales:
	VPMOVSXBW    (BX), Y8
	VMOVDQU      Y8, 32(SP)    // the 16 scales as int16
	MOVWLZX      (DX)(R10*2), AX
	VMOVD        AX, X9
	VCVTPH2PS    X9, X9
	VBROADCASTSS X9, Y9
	VMOVUPS      Y9, 0(SP)     // d_w, every lane

	// column loop: DI = x + 292·i + c·xstride, R8 = acc + 128c + 32(i mod 4)
	IMUL3Q $292, R10, DI
	ADDQ   x+32(FP), DI
	MOVQ   R10, R8
	ANDQ   $3, R8
	SHLQ   $5, R8
	ADDQ   acc+64(FP), R8
	MOVQ   ncols+48(FP), R9
	CMPB   form+72(FP), $FORM_TRANSPOSED
	JEQ    q6kntcol

q6kncol:
	CMPB form+72(FP), $FORM_VNNI
	JEQ  q6kncolvnni
	NC_COLUMN_SUMS(NC_UNIT)
	JMP  q6kncolsums

q6kncolvnni:
	NC_COLUMN_SUMS(NC_UNIT_VNNI)

q6kncolsums:
	VPMULLD    Y14, Y11, Y11
	VPMULLD    Y15, Y12, Y12
	VPERM2I128 $0x20, Y12, Y11, Y9
	VPERM2I128 $0x31, Y12, Y11, Y10
	VPADDD     Y10, Y9, Y9    // Σ sc·Σ q·a per unit
	VMOVDQU    32(SP), Y13
	VPMADDWD   260(DI), Y13, Y13
	VPSLLD     $5, Y13, Y13
	VPSUBD     Y13, Y9, Y9    // Σ sc·Σ (q−32)·a
	VCVTDQ2PS  Y9, Y9
	VMOVSS       0(SP), X12
	VMULSS       (DI), X12, X12
	VBROADCASTSS X12, Y12     // D
	VMOVUPS      (R8), Y10
	VFMADD231PS  Y9, Y12, Y10
	VMOVUPS      Y10, (R8)

	ADDQ xstride+40(FP), DI
	ADDQ $128, R8
	DECQ R9
	JNZ  q6kncol
	JMP  q6knnext

	// the transposed form's column loop: Y8 = the 16 scales as int16, D as a vector
	// product (d_w·d_x in every lane: the scalar product's bits)
q6kntcol:
	VPMADDUBSW 4(DI), Y0, Y9
	VPMADDUBSW 36(DI), Y1, Y10
	VPADDW     Y10, Y9, Y9
	VPMADDWD   NC_ONES, Y9, Y9
	VPMADDUBSW 68(DI), Y2, Y10
	VPMADDUBSW 100(DI), Y3, Y11
	VPADDW     Y11, Y10, Y10
	VPMADDWD   NC_ONES, Y10, Y10
	VPADDD     Y10, Y9, Y9     // lane L: Σ q·a of unit L's even sub-block
	VPMADDUBSW 132(DI), Y4, Y10
	VPMADDUBSW 164(DI), Y5, Y11
	VPADDW     Y11, Y10, Y10
	VPMADDWD   NC_ONES, Y10, Y10
	VPMADDUBSW 196(DI), Y6, Y11
	VPMADDUBSW 228(DI), Y7, Y12
	VPADDW     Y12, Y11, Y11
	VPMADDWD   NC_ONES, Y11, Y11
	VPADDD     Y11, Y10, Y10   // and of its odd one
	VPMULLD    Y14, Y9, Y9
	VPMULLD    Y15, Y10, Y10
	VPADDD     Y10, Y9, Y9     // Σ sc·Σ q·a per unit
	VPMADDWD   260(DI), Y8, Y13
	VPSLLD     $5, Y13, Y13
	VPSUBD     Y13, Y9, Y9     // Σ sc·Σ (q−32)·a
	VCVTDQ2PS  Y9, Y9
	VBROADCASTSS (DI), Y12
	VMULPS       0(SP), Y12, Y12 // D
	VMOVUPS      (R8), Y10
	VFMADD231PS  Y9, Y12, Y10
	VMOVUPS      Y10, (R8)

	ADDQ xstride+40(FP), DI
	ADDQ $128, R8
	DECQ R9
	JNZ  q6kntcol

q6knnext:
	ADDQ $128, SI
	ADDQ $16, BX
	INCQ R10
	CMPQ R10, CX
	JLT  q6knblock

q6kndone:
	VZEROUPPER
	RET


// Gated DeltaNet's state update (gdn.go, deltaRule) for 8 state columns j at a time: each
// column's chains over the rows i in order, as the Go loops; every state value stored and
// every output passes through the canonical NaN (num.Canon, FMA32).

// x = the canonical NaN where x is a NaN; clobbers mask.
#define CANON(x, mask) \
	VCMPPS    $3, x, x, mask      \
	VBLENDVPS mask, EXP_NAN, x, x

// func deltaRuleAVX2(o, s, q, k, v *float32, d int, e, b float32)
// d a multiple of 8; s is d×d, s[i·d+j].
TEXT ·deltaRuleAVX2(SB), NOSPLIT, $0-56
	MOVQ         o+0(FP), DI
	MOVQ         s+8(FP), R8
	MOVQ         q+16(FP), R9
	MOVQ         k+24(FP), R10
	MOVQ         v+32(FP), R11
	MOVQ         d+40(FP), CX
	VBROADCASTSS e+48(FP), Y14
	VBROADCASTSS b+52(FP), Y15
	MOVQ         CX, R13
	SHLQ         $2, R13       // row stride in bytes
	XORQ         DX, DX        // j
	TESTQ        CX, CX
	JZ           drdone

drcols:
	// pass 1: s[i][j] = Canon(e·s[i][j]); u = fma(s[i][j], k[i], u) over i
	LEAQ   (R8)(DX*4), SI
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
drpass1:
	VMULPS       (SI), Y14, Y1
	CANON(Y1, Y2)
	VMOVUPS      Y1, (SI)
	VBROADCASTSS (R10)(AX*4), Y3
	VFMADD231PS  Y3, Y1, Y0
	ADDQ         R13, SI
	INCQ         AX
	CMPQ         AX, CX
	JLT          drpass1

	// delta = (v[j] − u)·b
	VMOVUPS (R11)(DX*4), Y4
	VSUBPS  Y0, Y4, Y4
	VMULPS  Y15, Y4, Y4

	// pass 2: s[i][j] = fma(k[i], delta, s[i][j]); o = fma(s[i][j], q[i], o) over i
	LEAQ   (R8)(DX*4), SI
	XORQ   AX, AX
	VXORPS Y5, Y5, Y5
drpass2:
	VBROADCASTSS (R10)(AX*4), Y3
	VMOVUPS      (SI), Y1
	VFMADD231PS  Y4, Y3, Y1
	CANON(Y1, Y2)
	VMOVUPS      Y1, (SI)
	VBROADCASTSS (R9)(AX*4), Y6
	VFMADD231PS  Y6, Y1, Y5
	ADDQ         R13, SI
	INCQ         AX
	CMPQ         AX, CX
	JLT          drpass2

	CANON(Y5, Y2)
	VMOVUPS Y5, (DI)(DX*4)
	ADDQ    $8, DX
	CMPQ    DX, CX
	JLT     drcols

drdone:
	VZEROUPPER
	RET

// The legacy formats with a fifth bit (q5_0, q5_1) store it as the verbatim qh word: value l's
// bit is bit l mod 8 of byte ⌊l/8⌋. Broadcast the 4 bytes, move byte ⌊l/8⌋ to byte l
// (VPSHUFB within each 128-bit half: values 0-15 in the low half, 16-31 in the high), keep bit
// l mod 8, and turn a set bit into 16.
DATA qhIdx<>+0(SB)/8, $0x0000000000000000
DATA qhIdx<>+8(SB)/8, $0x0101010101010101
DATA qhIdx<>+16(SB)/8, $0x0202020202020202
DATA qhIdx<>+24(SB)/8, $0x0303030303030303
DATA qhIdx<>+32(SB)/8, $0x8040201008040201
DATA qhIdx<>+40(SB)/8, $0x8040201008040201
DATA qhIdx<>+48(SB)/8, $0x8040201008040201
DATA qhIdx<>+56(SB)/8, $0x8040201008040201
GLOBL qhIdx<>(SB), RODATA|NOPTR, $64
#define QH_IDX qhIdx<>+0(SB)
#define QH_BITS qhIdx<>+32(SB)

// Y1 |= 16·(fifth bit) from the qh word at hoff(R12); Y13 holds 0x10 bytes; clobbers Y2.
#define QH_HIGH(hoff) \
	VPBROADCASTD hoff(R12), Y2       \
	VPSHUFB      QH_IDX, Y2, Y2      \
	VPAND        QH_BITS, Y2, Y2     \
	VPCMPEQB     QH_BITS, Y2, Y2     \
	VPAND        Y13, Y2, Y2         \
	VPOR         Y2, Y1, Y1

// 16 plane bytes at qoff(SI) as 32 nibbles in value order into Y1.
#define NIBBLES(qoff) \
	VMOVDQU      qoff(SI), X1        \
	VPSRLW       $4, X1, X2          \
	VINSERTI128  $1, X2, Y1, Y1      \
	VPAND        Y15, Y1, Y1

// q4_1 (unsigned nibbles), q5_1 (nibbles + 16·bit) and q5_0 (the same − 16) units against the
// 32 activation quants at aoff(DI), as 8 int32 partial sums.
#define Q4_1_UNIT(qoff, aoff, dst) \
	NIBBLES(qoff)                    \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

#define Q5_1_UNIT(qoff, hoff, aoff, dst) \
	NIBBLES(qoff)                    \
	QH_HIGH(hoff)                    \
	VPMADDUBSW   aoff(DI), Y1, Y1    \
	VPMADDWD     Y14, Y1, dst

#define Q5_0_UNIT(qoff, hoff, aoff, dst) \
	NIBBLES(qoff)                    \
	QH_HIGH(hoff)                    \
	VMOVDQU      aoff(DI), Y2        \
	VPMADDUBSW   Y2, Y1, Y1          \
	VPMADDUBSW   Y2, Y13, Y2         \
	VPSUBW       Y2, Y1, Y1          \
	VPMADDWD     Y14, Y1, dst

// The q8_1 formats' fold of a chunk of 8 units (q4_1, q5_1): Y4 … Y11 the units' partial
// sums, DI the activation blocks (fp16 d, fp16 s, 32 int8: 36 bytes each), DX and R9 the
// weights' fp16 d and m of the chunk, R10 the chunk index, R8 the accumulators:
// t = fma(float32(S), d_w·d_x, m_w·s_x), acc = acc + t.
#define LEGACY1_FOLD \
	UNIT_SUMS \
	VCVTDQ2PS  Y0, Y0                \
	MOVWLZX    0(DI), AX             \
	VMOVD      AX, X1                \
	VPINSRW    $1, 36(DI), X1, X1    \
	VPINSRW    $2, 72(DI), X1, X1    \
	VPINSRW    $3, 108(DI), X1, X1   \
	VPINSRW    $4, 144(DI), X1, X1   \
	VPINSRW    $5, 180(DI), X1, X1   \
	VPINSRW    $6, 216(DI), X1, X1   \
	VPINSRW    $7, 252(DI), X1, X1   \
	VCVTPH2PS  X1, Y1                \
	VCVTPH2PS  (DX), Y2              \
	VMULPS     Y2, Y1, Y1            \
	MOVWLZX    2(DI), AX             \
	VMOVD      AX, X2                \
	VPINSRW    $1, 38(DI), X2, X2    \
	VPINSRW    $2, 74(DI), X2, X2    \
	VPINSRW    $3, 110(DI), X2, X2   \
	VPINSRW    $4, 146(DI), X2, X2   \
	VPINSRW    $5, 182(DI), X2, X2   \
	VPINSRW    $6, 218(DI), X2, X2   \
	VPINSRW    $7, 254(DI), X2, X2   \
	VCVTPH2PS  X2, Y2                \
	VCVTPH2PS  (R9), Y3              \
	VMULPS     Y3, Y2, Y2            \
	VFMADD231PS Y1, Y0, Y2           \
	MOVQ       R10, AX               \
	ANDQ       $3, AX                \
	SHLQ       $5, AX                \
	VMOVUPS    (R8)(AX*1), Y3        \
	VADDPS     Y2, Y3, Y3            \
	VMOVUPS    Y3, (R8)(AX*1)


// func q41DotAVX2(plane, d, m, x *byte, chunks int, acc *[32]float32)
TEXT ·q41DotAVX2(SB), NOSPLIT, $0-48
	MOVQ plane+0(FP), SI
	MOVQ d+8(FP), DX
	MOVQ m+16(FP), R9
	MOVQ x+24(FP), DI
	MOVQ chunks+32(FP), CX
	MOVQ acc+40(FP), R8
	XORQ R10, R10
	CONSTANTS
	TESTQ CX, CX
	JZ   q41done

q41loop:
	Q4_1_UNIT(0, 4, Y4)
	Q4_1_UNIT(16, 40, Y5)
	Q4_1_UNIT(32, 76, Y6)
	Q4_1_UNIT(48, 112, Y7)
	Q4_1_UNIT(64, 148, Y8)
	Q4_1_UNIT(80, 184, Y9)
	Q4_1_UNIT(96, 220, Y10)
	Q4_1_UNIT(112, 256, Y11)
	LEGACY1_FOLD
	ADDQ $128, SI
	ADDQ $16, DX
	ADDQ $16, R9
	ADDQ $288, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q41loop

q41done:
	VZEROUPPER
	RET

// func q51DotAVX2(plane, qh, d, m, x *byte, chunks int, acc *[32]float32)
TEXT ·q51DotAVX2(SB), NOSPLIT, $0-56
	MOVQ plane+0(FP), SI
	MOVQ qh+8(FP), R11
	MOVQ d+16(FP), DX
	MOVQ m+24(FP), R9
	MOVQ x+32(FP), DI
	MOVQ chunks+40(FP), CX
	MOVQ acc+48(FP), R8
	XORQ R10, R10
	CONSTANTS
	MOVL $0x10101010, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ   q51done

q51loop:
	PLANE4(R11, R12) // the chunk's qh words
	Q5_1_UNIT(0, 0, 4, Y4)
	Q5_1_UNIT(16, 16, 40, Y5)
	Q5_1_UNIT(32, 32, 76, Y6)
	Q5_1_UNIT(48, 48, 112, Y7)
	Q5_1_UNIT(64, 64, 148, Y8)
	Q5_1_UNIT(80, 80, 184, Y9)
	Q5_1_UNIT(96, 96, 220, Y10)
	Q5_1_UNIT(112, 112, 256, Y11)
	LEGACY1_FOLD
	ADDQ $128, SI
	ADDQ $16, DX
	ADDQ $16, R9
	ADDQ $288, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q51loop

q51done:
	VZEROUPPER
	RET

// func q50DotAVX2(plane, qh, d, x *byte, chunks int, acc *[32]float32)
TEXT ·q50DotAVX2(SB), NOSPLIT, $0-48
	MOVQ plane+0(FP), SI
	MOVQ qh+8(FP), R11
	MOVQ d+16(FP), DX
	MOVQ x+24(FP), DI
	MOVQ chunks+32(FP), CX
	MOVQ acc+40(FP), R8
	XORQ R10, R10
	CONSTANTS
	MOVL $0x10101010, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	TESTQ CX, CX
	JZ   q50done

q50loop:
	PLANE4(R11, R12) // the chunk's qh words
	Q5_0_UNIT(0, 0, 2, Y4)
	Q5_0_UNIT(16, 16, 36, Y5)
	Q5_0_UNIT(32, 32, 70, Y6)
	Q5_0_UNIT(48, 48, 104, Y7)
	Q5_0_UNIT(64, 64, 138, Y8)
	Q5_0_UNIT(80, 80, 172, Y9)
	Q5_0_UNIT(96, 96, 206, Y10)
	Q5_0_UNIT(112, 112, 240, Y11)
	LEGACY_FOLD
	ADDQ $128, SI
	ADDQ $16, DX
	ADDQ $272, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q50loop

q50done:
	VZEROUPPER
	RET

// func foldColumnsAVX2(acc *float32, n int, y *float32, stride int, add, one bool)
// For each column c < n: the fold of its 32 lane accumulators at acc[32c:] (num.WarpTotal's
// butterfly, as warpTotalAVX), a NaN made the canonical one, stored at y[c·stride] or, with
// add, added to the value there (a NaN sum made the canonical one); the accumulators are left
// zeroed for the next call. With one (a row of one super-block, which only touches lanes 0-7),
// lanes 8-31 are zero: their adds are x + 0 with a zero register, the same bits, and only
// lanes 0-7 are read and zeroed.
TEXT ·foldColumnsAVX2(SB), NOSPLIT, $0-34
	MOVQ    acc+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    y+16(FP), DI
	MOVQ    stride+24(FP), DX
	SHLQ    $2, DX
	MOVBLZX add+32(FP), BX
	MOVBLZX one+33(FP), R8
	VXORPS  Y2, Y2, Y2
	TESTQ   CX, CX
	JZ      foldcoldone

foldcol:
	TESTQ   R8, R8
	JZ      foldcolall
	VADDPS  0(SI), Y2, Y0 // (lanes 0-7 + 0) + (0 + 0)
	VMOVUPS Y2, 0(SI)
	JMP     foldcolhalves

foldcolall:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VADDPS  64(SI), Y0, Y0
	VADDPS  96(SI), Y1, Y1
	VMOVUPS Y2, 0(SI)
	VMOVUPS Y2, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y2, 96(SI)
	VADDPS  Y1, Y0, Y0

foldcolhalves:
	FOLD8(foldcolsum)
	TESTQ    BX, BX
	JZ       foldcolstore
	VADDSS   (DI), X0, X0
	VUCOMISS X0, X0
	JPC      foldcolstore
	MOVL     $0x7fffffff, AX
	VMOVD    AX, X0

foldcolstore:
	VMOVSS X0, (DI)
	ADDQ   $128, SI
	ADDQ   DX, DI
	DECQ   CX
	JNZ    foldcol
	VZEROUPPER

foldcoldone:
	RET

// func transposeQ8KAVX2(dst, src *byte, blocks int)
// transposeQ8K's quants for one activation row of q8_K blocks: each super-block's 8 × 8
// matrix of 4-byte groups transposed (TRANSPOSE_UNITS). The scales and block sums are left to
// the caller.
TEXT ·transposeQ8KAVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  blocks+16(FP), CX
	TESTQ CX, CX
	JZ    tq8kdone

tq8k:
	VMOVDQU 4(SI), Y0
	VMOVDQU 36(SI), Y1
	VMOVDQU 68(SI), Y2
	VMOVDQU 100(SI), Y3
	VMOVDQU 132(SI), Y4
	VMOVDQU 164(SI), Y5
	VMOVDQU 196(SI), Y6
	VMOVDQU 228(SI), Y7
	TRANSPOSE_UNITS
	VMOVDQU Y0, 4(DI)
	VMOVDQU Y1, 36(DI)
	VMOVDQU Y2, 68(DI)
	VMOVDQU Y3, 100(DI)
	VMOVDQU Y4, 132(DI)
	VMOVDQU Y5, 164(DI)
	VMOVDQU Y6, 196(DI)
	VMOVDQU Y7, 228(DI)
	ADDQ    $292, SI
	ADDQ    $292, DI
	DECQ    CX
	JNZ     tq8k
	VZEROUPPER

tq8kdone:
	RET

// func laneSumsAVX2(acc *[32]float32, e *float32, n int)
// acc[j mod 32] += e[j] for j = 0 … n−1 in order: whole groups of 32 as four vector adds,
// then the last values one at a time.
TEXT ·laneSumsAVX2(SB), NOSPLIT, $0-24
	MOVQ    acc+0(FP), DI
	MOVQ    e+8(FP), SI
	MOVQ    n+16(FP), CX
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3

lanesums32:
	CMPQ   CX, $32
	JLT    lanesumstail
	VADDPS 0(SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	ADDQ   $128, SI
	SUBQ   $32, CX
	JMP    lanesums32

lanesumstail:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	XORQ    AX, AX

lanesumsone:
	CMPQ   AX, CX
	JGE    lanesumsdone
	VMOVSS (DI)(AX*4), X0
	VADDSS (SI)(AX*4), X0, X0
	VMOVSS X0, (DI)(AX*4)
	INCQ   AX
	JMP    lanesumsone

lanesumsdone:
	RET

// func maxOfAVX2(e *float32, n int) float32
// The largest of −Inf and e[0 … n−1], NaNs passed over (each step keeps the running maximum
// unless the value is greater; a NaN never is). Which zero a zero maximum is may differ from
// Max32's; the caller redoes that case.
TEXT ·maxOfAVX2(SB), NOSPLIT, $0-20
	MOVQ         e+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0xff800000, AX
	VMOVD        AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS      Y0, Y1
	VMOVAPS      Y0, Y2
	VMOVAPS      Y0, Y3

maxof32:
	CMPQ    CX, $32
	JLT     maxoffold
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS  Y0, Y4, Y0
	VMAXPS  Y1, Y5, Y1
	VMAXPS  Y2, Y6, Y2
	VMAXPS  Y3, Y7, Y3
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     maxof32

maxoffold:
	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VZEROUPPER
	XORQ         AX, AX

maxofone:
	CMPQ   AX, CX
	JGE    maxofdone
	VMOVSS (SI)(AX*4), X1
	VMAXSS X0, X1, X0
	INCQ   AX
	JMP    maxofone

maxofdone:
	VMOVSS X0, ret+16(FP)
	RET


// func sigmoidMulAVX2(y, a, b *float32, n int)
// y[i] = Canon(a[i]·Sigmoid32(b[i])) for i < n, n a multiple of 8: num.Sigmoid32's operations in
// order (expNeg as siluMulAVX2 has them, then q + c for b ≥ 0 and
// scale(fma(hi, q, fma(hi, c, lo·q)), j) below), special inputs blended in as Sigmoid32
// handles them.
TEXT ·sigmoidMulAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   sigmoiddone

sigmoidloop:
	VMOVUPS (DX), Y13
	EXPNEG_Y13
	// x ≥ 0: q + c
	VADDPS      Y12, Y9, Y1
	// x < 0: scale(fma(hi, q, fma(hi, c, lo·q)), j)
	VMULPS      Y9, Y11, Y6
	VFMADD231PS Y12, Y10, Y6
	VFMADD231PS Y9, Y10, Y6
	VMULPS      Y4, Y6, Y6
	VMULPS      Y5, Y6, Y6
	VCMPPS      $0x1d, Y14, Y13, Y7
	VBLENDVPS   Y7, Y1, Y6, Y6
	// x > 128: 1; x < −128: +0; NaN: NaN
	VMOVUPS   EXP_ONE, Y8
	VCMPPS    $0x1e, EXP_POS128, Y13, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	VXORPS    Y8, Y8, Y8
	VCMPPS    $0x11, EXP_NEG128, Y13, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	VMOVUPS   EXP_NAN, Y8
	VCMPPS    $3, Y13, Y13, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	// a·, the canonical NaN
	VMULPS    (SI), Y6, Y6
	VCMPPS    $3, Y6, Y6, Y7
	VBLENDVPS Y7, Y8, Y6, Y6
	VMOVUPS   Y6, (DI)

	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  sigmoidloop

sigmoiddone:
	VZEROUPPER
	RET
