//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// The row-tile forms (tile_amd64.go): 16 weight rows at a time, each zmm lane one row, with
// AVX-512 (F, BW, VL) and VNNI. Per unit (32 values) the 16 rows' quant bytes are transposed
// into 8 registers W0…W7, register g holding every row's values 4g…4g+3 in its dword, so one
// VPDPBUSD with a broadcast activation dword adds four products to every row's unit sum and
// no horizontal sums are needed. Each row's arithmetic is its one-row form's: the same exact
// integer unit sums, the same fused multiply-adds into the same lane accumulators in the same
// order (unit u into lane u mod 32), then num.WarpTotal's fold with vector adds over the rows.
// The accumulators are memory: [column][lane][row] float32, 2048 bytes per column.
//
// tileArgs (tile_amd64.go), at BX:
//	0 stride, 8 plane, 16 plane2, 24 scale, 32 f16b (bytes from a block's first fp16 field
//	to its second), 40 blocks, 48 xstride, 56 ncols, 64 pf (the next bytes to prefetch; 0:
//	none), 72 pfn (64-byte lines per super-block)
//
// Registers: SI, R8, R9, R10 rows 0…3 of the current super-block's plane; rows 4j+a are
// j·4·stride further on (R11 = 4·stride, R12 = 12·stride); Z30 0x0f bytes, Z31 the row offsets.

// Transpose the dwords of four registers: A, B, C, D hold 4 rows' 16 bytes in each 128-bit
// lane (lane j: rows 4j, 4j+1, 4j+2, 4j+3 respectively); O0…O3 = dword 0…3 of rows 0…15 in
// order. Clobbers Z12 … Z15.
#define TRANSPOSE(A, B, C, D, O0, O1, O2, O3) \
	VPUNPCKLDQ  B, A, Z12   \
	VPUNPCKHDQ  B, A, Z13   \
	VPUNPCKLDQ  D, C, Z14   \
	VPUNPCKHDQ  D, C, Z15   \
	VPUNPCKLQDQ Z14, Z12, O0 \
	VPUNPCKHQDQ Z14, Z12, O1 \
	VPUNPCKLQDQ Z15, Z13, O2 \
	VPUNPCKHQDQ Z15, Z13, O3

// Z = the 16 bytes at off of rows a, a+4, a+8, a+12 (R = row a's pointer), one per lane.
#define ROWS16(off, R, X, Z) \
	VMOVDQU      off(R), X                   \
	VINSERTI32X4 $1, off(R)(R11*1), Z, Z     \
	VINSERTI32X4 $2, off(R)(R11*2), Z, Z     \
	VINSERTI32X4 $3, off(R)(R12*1), Z, Z

// Z8 … Z11 = the 16 bytes at off of all 16 rows (ROWS16 for a = 0 … 3).
#define LOAD16(off) \
	ROWS16(off, SI, X8, Z8)   \
	ROWS16(off, R8, X9, Z9)   \
	ROWS16(off, R9, X10, Z10) \
	ROWS16(off, R10, X11, Z11)

// Z8 … Z11 as LOAD16, each row's pointer displaced by register D (the same for all rows).
#define LOAD16D(D) \
	LEAQ (SI)(D*1), AX     \
	ROWS16(0, AX, X8, Z8)  \
	LEAQ (R8)(D*1), AX     \
	ROWS16(0, AX, X9, Z9)  \
	LEAQ (R9)(D*1), AX     \
	ROWS16(0, AX, X10, Z10) \
	LEAQ (R10)(D*1), AX    \
	ROWS16(0, AX, X11, Z11)

// Every 8 super-blocks (R13 a multiple of 8): fp16 field f (0: d, 1: dmin) of the next 8
// super-blocks of the 16 rows, transposed into the scratch after the accumulators: 32 bytes
// (16 rows) per super-block at acc + 32768 + 256f + 32j for super-block R13 + j. The rows'
// 16 bytes of fields are at their plane pointers + f·f16b + 2·R13 − plane − 128·R13 (for the
// last group they may run on into the next section of the row: unused). Clobbers R14, AX,
// Z0 … Z3, Z8 … Z15.
#define F16_GROUP(f) \
	MOVQ        32(BX), R14            \
	IMULQ       $f, R14                \
	SUBQ        8(BX), R14             \
	IMUL3Q      $126, R13, AX          \
	SUBQ        AX, R14                \
	LOAD16D(R14)                       \
	TRANSPOSE(Z8, Z9, Z10, Z11, Z0, Z1, Z2, Z3) \
	MOVQ        acc+24(FP), AX         \
	VPMOVDW     Z0, (32768+256*f)(AX)  \
	VPMOVDW     Z1, (32768+256*f+64)(AX) \
	VPMOVDW     Z2, (32768+256*f+128)(AX) \
	VPMOVDW     Z3, (32768+256*f+192)(AX) \
	VPSRLD      $16, Z0, Z0            \
	VPSRLD      $16, Z1, Z1            \
	VPSRLD      $16, Z2, Z2            \
	VPSRLD      $16, Z3, Z3            \
	VPMOVDW     Z0, (32768+256*f+32)(AX) \
	VPMOVDW     Z1, (32768+256*f+96)(AX) \
	VPMOVDW     Z2, (32768+256*f+160)(AX) \
	VPMOVDW     Z3, (32768+256*f+224)(AX)

// dst = fp16 field f of super-block R13 of the 16 rows (F16_GROUP's), as float32 (exact).
#define F16_FIELD(f, dst) \
	MOVQ      R13, AX                  \
	ANDQ      $7, AX                   \
	SHLQ      $5, AX                   \
	ADDQ      acc+24(FP), AX           \
	VCVTPH2PS (32768+256*f)(AX), dst

// Prefetch the next pfn lines from pf (the next tile, spread over the super-blocks of this
// one: streaming rows without it runs at half the rate or less). Clobbers AX, CX.
#define TILE_PREFETCH(label, done) \
	MOVQ        64(BX), AX  \
	TESTQ       AX, AX      \
	JZ          done        \
	MOVQ        72(BX), CX  \
label:                      \
	PREFETCHT0  (AX)        \
	ADDQ        $64, AX     \
	DECQ        CX          \
	JNZ         label       \
	MOVQ        AX, 64(BX)  \
done:

// 0 … 15, the rows of a tile (times the stride: their offsets).
DATA tileIota<>+0(SB)/8, $0x0000000100000000
DATA tileIota<>+8(SB)/8, $0x0000000300000002
DATA tileIota<>+16(SB)/8, $0x0000000500000004
DATA tileIota<>+24(SB)/8, $0x0000000700000006
DATA tileIota<>+32(SB)/8, $0x0000000900000008
DATA tileIota<>+40(SB)/8, $0x0000000b0000000a
DATA tileIota<>+48(SB)/8, $0x0000000d0000000c
DATA tileIota<>+56(SB)/8, $0x0000000f0000000e
GLOBL tileIota<>(SB), RODATA|NOPTR, $64

// The tile prologue: row pointers, strides, the rows' offsets (Z31), constants; zeroes the
// ncols columns of acc.
#define TILE_SETUP \
	MOVQ         a+16(FP), BX         \
	MOVQ         0(BX), R11           \
	MOVQ         w+0(FP), SI          \
	ADDQ         8(BX), SI            \
	LEAQ         (SI)(R11*1), R8      \
	LEAQ         (R8)(R11*1), R9      \
	LEAQ         (R9)(R11*1), R10     \
	LEAQ         (R11)(R11*2), R12    \
	SHLQ         $2, R12              \
	SHLQ         $2, R11              \
	MOVL         $0x0f0f0f0f, AX      \
	VPBROADCASTD AX, Z30              \
	MOVQ         0(BX), AX            \
	VPBROADCASTD AX, Z31              \
	VPMULLD      tileIota<>(SB), Z31, Z31 \
	MOVQ         acc+24(FP), DI       \
	MOVQ         56(BX), CX           \
	SHLQ         $3, CX               \
	VPXORD       Z0, Z0, Z0           \
tilezero:                            \
	VMOVUPS      Z0, (DI)             \
	VMOVUPS      Z0, 64(DI)           \
	VMOVUPS      Z0, 128(DI)          \
	VMOVUPS      Z0, 192(DI)          \
	ADDQ         $256, DI             \
	DECQ         CX                   \
	JNZ          tilezero

// The unit's 8 weight registers Z0 … Z7 from the transposed 4-bit plane Z0 … Z3 (low
// nibbles: values 4g…, high nibbles: values 16+4g…).
#define NIBBLES \
	VPSRLD $4, Z0, Z4    \
	VPSRLD $4, Z1, Z5    \
	VPSRLD $4, Z2, Z6    \
	VPSRLD $4, Z3, Z7    \
	VPANDD Z30, Z0, Z0   \
	VPANDD Z30, Z1, Z1   \
	VPANDD Z30, Z2, Z2   \
	VPANDD Z30, Z3, Z3   \
	VPANDD Z30, Z4, Z4   \
	VPANDD Z30, Z5, Z5   \
	VPANDD Z30, Z6, Z6   \
	VPANDD Z30, Z7, Z7

// Z24 = every row's Σ q·a over unit s (weights Z0 … Z7, the column's block at DI).
#define UNIT_DOT(s) \
	VPXORD        Z24, Z24, Z24         \
	VPDPBUSD.BCST (4+32*s)(DI), Z0, Z24  \
	VPDPBUSD.BCST (8+32*s)(DI), Z1, Z24  \
	VPDPBUSD.BCST (12+32*s)(DI), Z2, Z24 \
	VPDPBUSD.BCST (16+32*s)(DI), Z3, Z24 \
	VPDPBUSD.BCST (20+32*s)(DI), Z4, Z24 \
	VPDPBUSD.BCST (24+32*s)(DI), Z5, Z24 \
	VPDPBUSD.BCST (28+32*s)(DI), Z6, Z24 \
	VPDPBUSD.BCST (32+32*s)(DI), Z7, Z24

// The fold: for each of the ncols columns, num.WarpTotal of the 32 lanes of every row (lanes
// l and l+16, then +8, +4, +2, +1), a NaN made the canonical one, written to out[16c:].
// Clobbers Z30.
#define TILE_FOLD(label) \
	MOVL         $0x7fffffff, AX      \
	VPBROADCASTD AX, Z30              \
	MOVQ acc+24(FP), DX                \
	MOVQ out+32(FP), DI                \
	MOVQ 56(BX), CX                    \
label:                                 \
	VMOVUPS 0(DX), Z0                  \
	VMOVUPS 64(DX), Z1                 \
	VMOVUPS 128(DX), Z2                \
	VMOVUPS 192(DX), Z3                \
	VMOVUPS 256(DX), Z4                \
	VMOVUPS 320(DX), Z5                \
	VMOVUPS 384(DX), Z6                \
	VMOVUPS 448(DX), Z7                \
	VMOVUPS 512(DX), Z8                \
	VMOVUPS 576(DX), Z9                \
	VMOVUPS 640(DX), Z10               \
	VMOVUPS 704(DX), Z11               \
	VMOVUPS 768(DX), Z12               \
	VMOVUPS 832(DX), Z13               \
	VMOVUPS 896(DX), Z14               \
	VMOVUPS 960(DX), Z15               \
	VADDPS  1024(DX), Z0, Z0           \
	VADDPS  1088(DX), Z1, Z1           \
	VADDPS  1152(DX), Z2, Z2           \
	VADDPS  1216(DX), Z3, Z3           \
	VADDPS  1280(DX), Z4, Z4           \
	VADDPS  1344(DX), Z5, Z5           \
	VADDPS  1408(DX), Z6, Z6           \
	VADDPS  1472(DX), Z7, Z7           \
	VADDPS  1536(DX), Z8, Z8           \
	VADDPS  1600(DX), Z9, Z9           \
	VADDPS  1664(DX), Z10, Z10         \
	VADDPS  1728(DX), Z11, Z11         \
	VADDPS  1792(DX), Z12, Z12         \
	VADDPS  1856(DX), Z13, Z13         \
	VADDPS  1920(DX), Z14, Z14         \
	VADDPS  1984(DX), Z15, Z15         \
	VADDPS  Z8, Z0, Z0                 \
	VADDPS  Z9, Z1, Z1                 \
	VADDPS  Z10, Z2, Z2                \
	VADDPS  Z11, Z3, Z3                \
	VADDPS  Z12, Z4, Z4                \
	VADDPS  Z13, Z5, Z5                \
	VADDPS  Z14, Z6, Z6                \
	VADDPS  Z15, Z7, Z7                \
	VADDPS  Z4, Z0, Z0                 \
	VADDPS  Z5, Z1, Z1                 \
	VADDPS  Z6, Z2, Z2                 \
	VADDPS  Z7, Z3, Z3                 \
	VADDPS  Z2, Z0, Z0                 \
	VADDPS  Z3, Z1, Z1                 \
	VADDPS  Z1, Z0, Z0                 \
	VCMPPS  $3, Z0, Z0, K2             \
	VMOVDQA32 Z30, K2, Z0              \
	VMOVUPS Z0, (DI)                   \
	ADDQ    $2048, DX                  \
	ADDQ    $64, DI                    \
	DECQ    CX                         \
	JNZ     label

// VPSHUFB controls placing byte t of each dword: alone (a zero-extended dword) and twice
// (two int16 halves), for t = 0 … 3.
DATA tileByte<>+0(SB)/8, $0x8080800480808000
DATA tileByte<>+8(SB)/8, $0x8080800c80808008
DATA tileByte<>+16(SB)/8, $0x8080800480808000
DATA tileByte<>+24(SB)/8, $0x8080800c80808008
DATA tileByte<>+32(SB)/8, $0x8080800480808000
DATA tileByte<>+40(SB)/8, $0x8080800c80808008
DATA tileByte<>+48(SB)/8, $0x8080800480808000
DATA tileByte<>+56(SB)/8, $0x8080800c80808008
DATA tileByte<>+64(SB)/8, $0x8080800580808001
DATA tileByte<>+72(SB)/8, $0x8080800d80808009
DATA tileByte<>+80(SB)/8, $0x8080800580808001
DATA tileByte<>+88(SB)/8, $0x8080800d80808009
DATA tileByte<>+96(SB)/8, $0x8080800580808001
DATA tileByte<>+104(SB)/8, $0x8080800d80808009
DATA tileByte<>+112(SB)/8, $0x8080800580808001
DATA tileByte<>+120(SB)/8, $0x8080800d80808009
DATA tileByte<>+128(SB)/8, $0x8080800680808002
DATA tileByte<>+136(SB)/8, $0x8080800e8080800a
DATA tileByte<>+144(SB)/8, $0x8080800680808002
DATA tileByte<>+152(SB)/8, $0x8080800e8080800a
DATA tileByte<>+160(SB)/8, $0x8080800680808002
DATA tileByte<>+168(SB)/8, $0x8080800e8080800a
DATA tileByte<>+176(SB)/8, $0x8080800680808002
DATA tileByte<>+184(SB)/8, $0x8080800e8080800a
DATA tileByte<>+192(SB)/8, $0x8080800780808003
DATA tileByte<>+200(SB)/8, $0x8080800f8080800b
DATA tileByte<>+208(SB)/8, $0x8080800780808003
DATA tileByte<>+216(SB)/8, $0x8080800f8080800b
DATA tileByte<>+224(SB)/8, $0x8080800780808003
DATA tileByte<>+232(SB)/8, $0x8080800f8080800b
DATA tileByte<>+240(SB)/8, $0x8080800780808003
DATA tileByte<>+248(SB)/8, $0x8080800f8080800b
DATA tileByte<>+256(SB)/8, $0x8004800480008000
DATA tileByte<>+264(SB)/8, $0x800c800c80088008
DATA tileByte<>+272(SB)/8, $0x8004800480008000
DATA tileByte<>+280(SB)/8, $0x800c800c80088008
DATA tileByte<>+288(SB)/8, $0x8004800480008000
DATA tileByte<>+296(SB)/8, $0x800c800c80088008
DATA tileByte<>+304(SB)/8, $0x8004800480008000
DATA tileByte<>+312(SB)/8, $0x800c800c80088008
DATA tileByte<>+320(SB)/8, $0x8005800580018001
DATA tileByte<>+328(SB)/8, $0x800d800d80098009
DATA tileByte<>+336(SB)/8, $0x8005800580018001
DATA tileByte<>+344(SB)/8, $0x800d800d80098009
DATA tileByte<>+352(SB)/8, $0x8005800580018001
DATA tileByte<>+360(SB)/8, $0x800d800d80098009
DATA tileByte<>+368(SB)/8, $0x8005800580018001
DATA tileByte<>+376(SB)/8, $0x800d800d80098009
DATA tileByte<>+384(SB)/8, $0x8006800680028002
DATA tileByte<>+392(SB)/8, $0x800e800e800a800a
DATA tileByte<>+400(SB)/8, $0x8006800680028002
DATA tileByte<>+408(SB)/8, $0x800e800e800a800a
DATA tileByte<>+416(SB)/8, $0x8006800680028002
DATA tileByte<>+424(SB)/8, $0x800e800e800a800a
DATA tileByte<>+432(SB)/8, $0x8006800680028002
DATA tileByte<>+440(SB)/8, $0x800e800e800a800a
DATA tileByte<>+448(SB)/8, $0x8007800780038003
DATA tileByte<>+456(SB)/8, $0x800f800f800b800b
DATA tileByte<>+464(SB)/8, $0x8007800780038003
DATA tileByte<>+472(SB)/8, $0x800f800f800b800b
DATA tileByte<>+480(SB)/8, $0x8007800780038003
DATA tileByte<>+488(SB)/8, $0x800f800f800b800b
DATA tileByte<>+496(SB)/8, $0x8007800780038003
DATA tileByte<>+504(SB)/8, $0x800f800f800b800b
GLOBL tileByte<>(SB), RODATA|NOPTR, $512
#define BYTE1(t) tileByte<>+(64*(t))(SB)
#define BYTE2(t) tileByte<>+(256+64*(t))(SB)

// The columns of q4_K or q5_K unit s: its scale and min (Z16 … Z19: sc_0…3, sc_4…7, m_0…3,
// m_4…7, a dword per row), then every column with the weights Z0 … Z7; Z20, Z21: d_w and
// dmin_w.
#define Q45K_COLUMNS(s, SCR, MR, t, label) \
	VPSHUFB    BYTE1(t), SCR, Z22              \
	VPSHUFB    BYTE2(t), MR, Z23               \
	MOVQ       xblk-8(SP), DI                  \
	MOVQ       lane-16(SP), DX                 \
	ADDQ       $(64*s), DX                     \
	MOVQ       56(BX), CX                      \
label:                                         \
	UNIT_DOT(s)                                \
	VPMULLD       Z22, Z24, Z24                \
	VCVTDQ2PS     Z24, Z24                     \
	VPXORD        Z25, Z25, Z25                \
	VPDPWSSD.BCST (260+4*s)(DI), Z23, Z25      \
	VCVTDQ2PS     Z25, Z25                     \
	VMULPS.BCST   (DI), Z20, Z26               \
	VMULPS.BCST   (DI), Z21, Z27               \
	VMOVUPS       (DX), Z28                    \
	VFMADD231PS   Z24, Z26, Z28                \
	VFNMADD231PS  Z25, Z27, Z28                \
	VMOVUPS       Z28, (DX)                    \
	ADDQ          48(BX), DI                   \
	ADDQ          $2048, DX                    \
	DECQ          CX                           \
	JNZ           label

// One q4_K unit s of the super-block: weights, then the columns.
#define Q4K_UNIT(s, SCR, MR, t, label) \
	LOAD16(16*s)                               \
	TRANSPOSE(Z8, Z9, Z10, Z11, Z0, Z1, Z2, Z3) \
	NIBBLES                                    \
	Q45K_COLUMNS(s, SCR, MR, t, label)

// q5_K's fifth bits of unit s: the 16 rows' high-plane dwords gathered from hb-32(SP) + 16s
// (value l's bit in byte l mod 4 at bit ⌊l/4⌋: bit g for W_g), ORed in at bit 4 (Z29 = 0x10
// bytes; VPTERNLOGD $0xf8: dst |= src2 & src3). Clobbers Z8, Z9, K1, AX.
#define Q5K_FIFTH(s) \
	MOVQ       hb-32(SP), AX                   \
	KXNORW     K1, K1, K1                      \
	VPGATHERDD (16*s)(AX)(Z31*1), K1, Z8       \
	VPSLLD     $4, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z0              \
	VPSLLD     $3, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z1              \
	VPSLLD     $2, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z2              \
	VPSLLD     $1, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z3              \
	VPTERNLOGD $0xf8, Z29, Z8, Z4              \
	VPSRLD     $1, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z5              \
	VPSRLD     $2, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z6              \
	VPSRLD     $3, Z8, Z9                      \
	VPTERNLOGD $0xf8, Z29, Z9, Z7

// One q5_K unit s: q4_K's weights with the fifth bits, then the columns.
#define Q5K_UNIT(s, SCR, MR, t, label) \
	LOAD16(16*s)                               \
	TRANSPOSE(Z8, Z9, Z10, Z11, Z0, Z1, Z2, Z3) \
	NIBBLES                                    \
	Q5K_FIFTH(s)                               \
	Q45K_COLUMNS(s, SCR, MR, t, label)

// func q4KTile16(w, x *byte, a *tileArgs, acc, out *float32)
// acc: 2048·ncols bytes of scratch; out: 16·ncols float32.
TEXT ·q4KTile16(SB), NOSPLIT, $32-40
	TILE_SETUP
	MOVQ x+8(FP), AX
	MOVQ AX, xblk-8(SP)
	XORQ R13, R13

q4ktblock:
	// d and dmin of super-block i = R13 for the 16 rows
	TESTQ $7, R13
	JNZ   q4ktf16
	F16_GROUP(0)
	F16_GROUP(1)
q4ktf16:
	F16_FIELD(0, Z20)
	F16_FIELD(1, Z21)
	TILE_PREFETCH(q4ktpf, q4ktpfdone)

	// the scale bytes: row pointer + scale − plane − 112·i
	MOVQ   24(BX), R14
	SUBQ   8(BX), R14
	IMUL3Q $112, R13, AX
	SUBQ   AX, R14
	LOAD16D(R14)
	TRANSPOSE(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)

	// lanes 8(i mod 4) … +7
	MOVQ R13, AX
	ANDQ $3, AX
	SHLQ $9, AX
	ADDQ acc+24(FP), AX
	MOVQ AX, lane-16(SP)

	Q4K_UNIT(0, Z16, Z18, 0, q4ktc0)
	Q4K_UNIT(1, Z16, Z18, 1, q4ktc1)
	Q4K_UNIT(2, Z16, Z18, 2, q4ktc2)
	Q4K_UNIT(3, Z16, Z18, 3, q4ktc3)
	Q4K_UNIT(4, Z17, Z19, 0, q4ktc4)
	Q4K_UNIT(5, Z17, Z19, 1, q4ktc5)
	Q4K_UNIT(6, Z17, Z19, 2, q4ktc6)
	Q4K_UNIT(7, Z17, Z19, 3, q4ktc7)

	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $292, xblk-8(SP)
	INCQ R13
	CMPQ R13, 40(BX)
	JLT  q4ktblock

	TILE_FOLD(q4ktfold)
	VZEROUPPER
	RET

// func q5KTile16(w, x *byte, a *tileArgs, acc, out *float32)
// q4KTile16 with q5_K's fifth bits.
TEXT ·q5KTile16(SB), NOSPLIT, $40-40
	TILE_SETUP
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z29
	MOVQ x+8(FP), AX
	MOVQ AX, xblk-8(SP)
	XORQ R13, R13

q5ktblock:
	// d and dmin of super-block i = R13 for the 16 rows
	TESTQ $7, R13
	JNZ   q5ktf16
	F16_GROUP(0)
	F16_GROUP(1)
q5ktf16:
	F16_FIELD(0, Z20)
	F16_FIELD(1, Z21)
	TILE_PREFETCH(q5ktpf, q5ktpfdone)

	// the scale bytes: row pointer + scale − plane − 112·i
	MOVQ   24(BX), R14
	SUBQ   8(BX), R14
	IMUL3Q $112, R13, AX
	SUBQ   AX, R14
	LOAD16D(R14)
	TRANSPOSE(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)

	// the high plane of super-block i: row 0 at w + plane2 + 512⌊i/16⌋ + 128(i mod 4) +
	// 4(⌊i/4⌋ mod 4)
	MOVQ w+0(FP), AX
	ADDQ 16(BX), AX
	MOVQ R13, R14
	SHRQ $4, R14
	SHLQ $9, R14
	ADDQ R14, AX
	MOVQ R13, R14
	ANDQ $3, R14
	SHLQ $7, R14
	ADDQ R14, AX
	MOVQ R13, R14
	SHRQ $2, R14
	ANDQ $3, R14
	SHLQ $2, R14
	ADDQ R14, AX
	MOVQ AX, hb-32(SP)

	// lanes 8(i mod 4) … +7
	MOVQ R13, AX
	ANDQ $3, AX
	SHLQ $9, AX
	ADDQ acc+24(FP), AX
	MOVQ AX, lane-16(SP)

	Q5K_UNIT(0, Z16, Z18, 0, q5ktc0)
	Q5K_UNIT(1, Z16, Z18, 1, q5ktc1)
	Q5K_UNIT(2, Z16, Z18, 2, q5ktc2)
	Q5K_UNIT(3, Z16, Z18, 3, q5ktc3)
	Q5K_UNIT(4, Z17, Z19, 0, q5ktc4)
	Q5K_UNIT(5, Z17, Z19, 1, q5ktc5)
	Q5K_UNIT(6, Z17, Z19, 2, q5ktc6)
	Q5K_UNIT(7, Z17, Z19, 3, q5ktc7)

	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $292, xblk-8(SP)
	INCQ R13
	CMPQ R13, 40(BX)
	JLT  q5ktblock

	TILE_FOLD(q5ktfold)
	VZEROUPPER
	RET

// q6_K's scale controls: byte t of each dword alone in its top byte (for an arithmetic shift
// right by 24: the sign-extended int8), t = 0 … 3; bytes t and t+1 in the high bytes of the
// two int16 halves (shifted right by 8: two sign-extended int16), t = 0, 2.
DATA tileQ6<>+0(SB)/8, $0x0480808000808080
DATA tileQ6<>+8(SB)/8, $0x0c80808008808080
DATA tileQ6<>+16(SB)/8, $0x0480808000808080
DATA tileQ6<>+24(SB)/8, $0x0c80808008808080
DATA tileQ6<>+32(SB)/8, $0x0480808000808080
DATA tileQ6<>+40(SB)/8, $0x0c80808008808080
DATA tileQ6<>+48(SB)/8, $0x0480808000808080
DATA tileQ6<>+56(SB)/8, $0x0c80808008808080
DATA tileQ6<>+64(SB)/8, $0x0580808001808080
DATA tileQ6<>+72(SB)/8, $0x0d80808009808080
DATA tileQ6<>+80(SB)/8, $0x0580808001808080
DATA tileQ6<>+88(SB)/8, $0x0d80808009808080
DATA tileQ6<>+96(SB)/8, $0x0580808001808080
DATA tileQ6<>+104(SB)/8, $0x0d80808009808080
DATA tileQ6<>+112(SB)/8, $0x0580808001808080
DATA tileQ6<>+120(SB)/8, $0x0d80808009808080
DATA tileQ6<>+128(SB)/8, $0x0680808002808080
DATA tileQ6<>+136(SB)/8, $0x0e8080800a808080
DATA tileQ6<>+144(SB)/8, $0x0680808002808080
DATA tileQ6<>+152(SB)/8, $0x0e8080800a808080
DATA tileQ6<>+160(SB)/8, $0x0680808002808080
DATA tileQ6<>+168(SB)/8, $0x0e8080800a808080
DATA tileQ6<>+176(SB)/8, $0x0680808002808080
DATA tileQ6<>+184(SB)/8, $0x0e8080800a808080
DATA tileQ6<>+192(SB)/8, $0x0780808003808080
DATA tileQ6<>+200(SB)/8, $0x0f8080800b808080
DATA tileQ6<>+208(SB)/8, $0x0780808003808080
DATA tileQ6<>+216(SB)/8, $0x0f8080800b808080
DATA tileQ6<>+224(SB)/8, $0x0780808003808080
DATA tileQ6<>+232(SB)/8, $0x0f8080800b808080
DATA tileQ6<>+240(SB)/8, $0x0780808003808080
DATA tileQ6<>+248(SB)/8, $0x0f8080800b808080
DATA tileQ6<>+256(SB)/8, $0x0580048001800080
DATA tileQ6<>+264(SB)/8, $0x0d800c8009800880
DATA tileQ6<>+272(SB)/8, $0x0580048001800080
DATA tileQ6<>+280(SB)/8, $0x0d800c8009800880
DATA tileQ6<>+288(SB)/8, $0x0580048001800080
DATA tileQ6<>+296(SB)/8, $0x0d800c8009800880
DATA tileQ6<>+304(SB)/8, $0x0580048001800080
DATA tileQ6<>+312(SB)/8, $0x0d800c8009800880
DATA tileQ6<>+320(SB)/8, $0x0780068003800280
DATA tileQ6<>+328(SB)/8, $0x0f800e800b800a80
DATA tileQ6<>+336(SB)/8, $0x0780068003800280
DATA tileQ6<>+344(SB)/8, $0x0f800e800b800a80
DATA tileQ6<>+352(SB)/8, $0x0780068003800280
DATA tileQ6<>+360(SB)/8, $0x0f800e800b800a80
DATA tileQ6<>+368(SB)/8, $0x0780068003800280
DATA tileQ6<>+376(SB)/8, $0x0f800e800b800a80
GLOBL tileQ6<>(SB), RODATA|NOPTR, $384
#define TOPBYTE(t) tileQ6<>+(64*(t))(SB)
#define PAIRBYTES(t) tileQ6<>+(256+32*(t))(SB)

// The 16 rows' 8 high-plane bytes of q6_K unit s: H0 = Z8 and H1 = Z9, their dwords 0 and 1
// (values 4h… at bits 0-1, 8+4h… at 2-3, 16+4h… at 4-5, 24+4h… at 6-7 of dword h). Row
// a's 16-byte piece holding the unit is at R_a + R14 + 16s: the unit is its low half (dwords
// 0, 1), or its high half (dwords 2, 3) for the rows where K2 is set (every row, for a
// super-block whose units are high halves; none otherwise). Clobbers Z10 … Z15.
#define Q6K_HIGH(s, label) \
	LEAQ (SI)(R14*1), AX               \
	ROWS16(16*s, AX, X8, Z8)           \
	LEAQ (R8)(R14*1), AX               \
	ROWS16(16*s, AX, X9, Z9)           \
	LEAQ (R9)(R14*1), AX               \
	ROWS16(16*s, AX, X10, Z10)         \
	LEAQ (R10)(R14*1), AX              \
	ROWS16(16*s, AX, X11, Z11)         \
	VPUNPCKLDQ  Z9, Z8, Z12            \
	VPUNPCKLDQ  Z11, Z10, Z14          \
	VPUNPCKHDQ  Z9, Z8, Z13            \
	VPUNPCKHDQ  Z11, Z10, Z15          \
	VPUNPCKLQDQ Z14, Z12, Z8           \
	VPUNPCKHQDQ Z14, Z12, Z9           \
	VPUNPCKLQDQ Z15, Z13, Z10          \
	VPUNPCKHQDQ Z15, Z13, Z11          \
	VMOVDQA32   Z10, K2, Z8            \
	VMOVDQA32   Z11, K2, Z9

// The unit's 6-bit quants: Z0 … Z3 (the transposed low plane) and H0, H1 (Z8, Z9) give
// W_k = (L_k & 0x0f) | bits 4-5 from H_(k mod 2) at shift 2⌊k/2⌋ (values 4k…) and
// W_4+k = (L_k >> 4 & 0x0f) | bits 4-5 from H_(k mod 2) at shift 4 + 2⌊k/2⌋ (values 16+4k…).
// Z29 = 0x30 bytes, Z30 = 0x0f bytes; VPTERNLOGD $0xea: dst = (dst & src2) | src3.
// Clobbers Z10 … Z15.
#define Q6K_QUANTS \
	VPSLLD     $4, Z8, Z10             \
	VPANDD     Z29, Z10, Z10           \
	VPSLLD     $4, Z9, Z11             \
	VPANDD     Z29, Z11, Z11           \
	VPSLLD     $2, Z8, Z12             \
	VPANDD     Z29, Z12, Z12           \
	VPSLLD     $2, Z9, Z13             \
	VPANDD     Z29, Z13, Z13           \
	VPSRLD     $4, Z0, Z4              \
	VPSRLD     $4, Z1, Z5              \
	VPSRLD     $4, Z2, Z6              \
	VPSRLD     $4, Z3, Z7              \
	VPTERNLOGD $0xea, Z10, Z30, Z0     \
	VPTERNLOGD $0xea, Z11, Z30, Z1     \
	VPTERNLOGD $0xea, Z12, Z30, Z2     \
	VPTERNLOGD $0xea, Z13, Z30, Z3     \
	VPANDD     Z29, Z8, Z10            \
	VPANDD     Z29, Z9, Z11            \
	VPSRLD     $2, Z8, Z12             \
	VPANDD     Z29, Z12, Z12           \
	VPSRLD     $2, Z9, Z13             \
	VPANDD     Z29, Z13, Z13           \
	VPTERNLOGD $0xea, Z10, Z30, Z4     \
	VPTERNLOGD $0xea, Z11, Z30, Z5     \
	VPTERNLOGD $0xea, Z12, Z30, Z6     \
	VPTERNLOGD $0xea, Z13, Z30, Z7

// One q6_K unit s of the super-block. Z16 … Z19: the 16 scales' dwords (sc_4j … sc_4j+3 in
// Z16+j); Z20: d_w. Per column: S0, S1 = the two groups' Σ q·a, then
// S = sc_2s·S0 + sc_2s+1·S1 − 32·(sc_2s·bsums[2s] + sc_2s+1·bsums[2s+1]) (exact) and
// acc = fma(D, float32(S), acc).
#define Q6K_UNIT(s, QR, t, p, label, hlabel) \
	LOAD16(16*s)                                \
	TRANSPOSE(Z8, Z9, Z10, Z11, Z0, Z1, Z2, Z3) \
	Q6K_HIGH(s, hlabel)                         \
	Q6K_QUANTS                                  \
	VPSHUFB    TOPBYTE(t), QR, Z21              \
	VPSRAD     $24, Z21, Z21                    \
	VPSHUFB    TOPBYTE(t+1), QR, Z22            \
	VPSRAD     $24, Z22, Z22                    \
	VPSHUFB    PAIRBYTES(p), QR, Z23            \
	VPSRAW     $8, Z23, Z23                     \
	MOVQ       xblk-8(SP), DI                   \
	MOVQ       lane-16(SP), DX                  \
	ADDQ       $(64*s), DX                      \
	MOVQ       56(BX), CX                       \
label:                                          \
	VPXORD        Z24, Z24, Z24                 \
	VPXORD        Z25, Z25, Z25                 \
	VPDPBUSD.BCST (4+32*s)(DI), Z0, Z24         \
	VPDPBUSD.BCST (20+32*s)(DI), Z4, Z25        \
	VPDPBUSD.BCST (8+32*s)(DI), Z1, Z24         \
	VPDPBUSD.BCST (24+32*s)(DI), Z5, Z25        \
	VPDPBUSD.BCST (12+32*s)(DI), Z2, Z24        \
	VPDPBUSD.BCST (28+32*s)(DI), Z6, Z25        \
	VPDPBUSD.BCST (16+32*s)(DI), Z3, Z24        \
	VPDPBUSD.BCST (32+32*s)(DI), Z7, Z25        \
	VPMULLD       Z21, Z24, Z24                 \
	VPMULLD       Z22, Z25, Z25                 \
	VPADDD        Z25, Z24, Z24                 \
	VPXORD        Z26, Z26, Z26                 \
	VPDPWSSD.BCST (260+4*s)(DI), Z23, Z26       \
	VPSLLD        $5, Z26, Z26                  \
	VPSUBD        Z26, Z24, Z24                 \
	VCVTDQ2PS     Z24, Z24                      \
	VMULPS.BCST   (DI), Z20, Z27                \
	VMOVUPS       (DX), Z28                     \
	VFMADD231PS   Z24, Z27, Z28                 \
	VMOVUPS       Z28, (DX)                     \
	ADDQ          48(BX), DI                    \
	ADDQ          $2048, DX                     \
	DECQ          CX                            \
	JNZ           label

// func q6KTile16(w, x *byte, a *tileArgs, acc, out *float32)
TEXT ·q6KTile16(SB), NOSPLIT, $32-40
	TILE_SETUP
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z29
	MOVQ x+8(FP), AX
	MOVQ AX, xblk-8(SP)
	XORQ R13, R13

q6ktblock:
	// d of super-block i = R13 for the 16 rows
	TESTQ $7, R13
	JNZ   q6ktf16
	F16_GROUP(0)
q6ktf16:
	F16_FIELD(0, Z20)
	TILE_PREFETCH(q6ktpf, q6ktpfdone)

	// the scale bytes: row pointer + scale − plane − 112·i
	MOVQ   24(BX), R14
	SUBQ   8(BX), R14
	IMUL3Q $112, R13, AX
	SUBQ   AX, R14
	LOAD16D(R14)
	TRANSPOSE(Z8, Z9, Z10, Z11, Z16, Z17, Z18, Z19)

	// the high plane's piece of super-block i: plane2 + 512⌊i/8⌋ + 128(i mod 4), from the
	// low plane's 128·i; the unit in its high half where ⌊i/4⌋ is odd
	MOVQ 16(BX), R14
	SUBQ 8(BX), R14
	MOVQ R13, AX
	SHRQ $3, AX
	SHLQ $9, AX
	ADDQ AX, R14
	MOVQ R13, AX
	ANDQ $3, AX
	SHLQ $7, AX
	ADDQ AX, R14
	MOVQ R13, AX
	SHLQ $7, AX
	SUBQ AX, R14
	MOVQ R13, AX
	SHRQ $2, AX
	ANDQ $1, AX
	NEGQ AX
	KMOVW AX, K2 // every row where the units are high halves

	// lanes 8(i mod 4) … +7
	MOVQ R13, AX
	ANDQ $3, AX
	SHLQ $9, AX
	ADDQ acc+24(FP), AX
	MOVQ AX, lane-16(SP)

	Q6K_UNIT(0, Z16, 0, 0, q6ktc0, q6kth0)
	Q6K_UNIT(1, Z16, 2, 2, q6ktc1, q6kth1)
	Q6K_UNIT(2, Z17, 0, 0, q6ktc2, q6kth2)
	Q6K_UNIT(3, Z17, 2, 2, q6ktc3, q6kth3)
	Q6K_UNIT(4, Z18, 0, 0, q6ktc4, q6kth4)
	Q6K_UNIT(5, Z18, 2, 2, q6ktc5, q6kth5)
	Q6K_UNIT(6, Z19, 0, 0, q6ktc6, q6kth6)
	Q6K_UNIT(7, Z19, 2, 2, q6ktc7, q6kth7)

	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $292, xblk-8(SP)
	INCQ R13
	CMPQ R13, 40(BX)
	JLT  q6ktblock

	TILE_FOLD(q6ktfold)
	VZEROUPPER
	RET

// The rows form of q6_K with AVX-512 VNNI (q6KRowsVNNI): one row at a time, as q6KRowsAVX2, a
// super-block's units four at a time, one per 128-bit lane. The activations come prepared
// (prepQ6KRows, tile_amd64.go), 384 bytes per super-block: at 0 and 128 the quants of values
// 0-15 of units 0-3 and 4-7 (lane k: unit 4h+k's), at 64 and 192 those of values 16-31; at 256
// 32·bsums[g] as int32 in the order of the group sums below; at 320 the block's float32 d.

// Z31 0x0f bytes, Z30 0x30 bytes, Z29 the shifts 4, 2 and Z28 0, 2 of each lane's two qwords,
// Z27 and Z26 permutations.
DATA q6kvConst<>+0(SB)/8, $4
DATA q6kvConst<>+8(SB)/8, $2
DATA q6kvConst<>+16(SB)/8, $0
DATA q6kvConst<>+24(SB)/8, $2
// the 16 scales in the group sums' order: lane k holds groups 2k, 2k+1, 2k+8, 2k+9
DATA q6kvConst<>+32(SB)/4, $0
DATA q6kvConst<>+36(SB)/4, $1
DATA q6kvConst<>+40(SB)/4, $8
DATA q6kvConst<>+44(SB)/4, $9
DATA q6kvConst<>+48(SB)/4, $2
DATA q6kvConst<>+52(SB)/4, $3
DATA q6kvConst<>+56(SB)/4, $10
DATA q6kvConst<>+60(SB)/4, $11
DATA q6kvConst<>+64(SB)/4, $4
DATA q6kvConst<>+68(SB)/4, $5
DATA q6kvConst<>+72(SB)/4, $12
DATA q6kvConst<>+76(SB)/4, $13
DATA q6kvConst<>+80(SB)/4, $6
DATA q6kvConst<>+84(SB)/4, $7
DATA q6kvConst<>+88(SB)/4, $14
DATA q6kvConst<>+92(SB)/4, $15
// the unit sums (dword 4k: unit k, 4k+2: unit 4+k) in unit order
DATA q6kvConst<>+96(SB)/4, $0
DATA q6kvConst<>+100(SB)/4, $4
DATA q6kvConst<>+104(SB)/4, $8
DATA q6kvConst<>+108(SB)/4, $12
DATA q6kvConst<>+112(SB)/4, $2
DATA q6kvConst<>+116(SB)/4, $6
DATA q6kvConst<>+120(SB)/4, $10
DATA q6kvConst<>+124(SB)/4, $14
DATA q6kvConst<>+128(SB)/8, $0
DATA q6kvConst<>+136(SB)/8, $0
DATA q6kvConst<>+144(SB)/8, $0
DATA q6kvConst<>+152(SB)/8, $0
GLOBL q6kvConst<>(SB), RODATA|NOPTR, $160

// R12 = the high plane's pieces of super-block i = R10: R11 + 512⌊i/8⌋ + 128(i mod 4) (unit
// s's 8 bytes in the low or, where ⌊i/4⌋ is odd, high half of the piece at 16s). Clobbers AX,
// R13.
#define Q6KV_HIGH \
	MOVQ R10, AX          \
	SHRQ $3, AX           \
	SHLQ $9, AX           \
	MOVQ R10, R13         \
	ANDQ $3, R13          \
	SHLQ $7, R13          \
	ADDQ R13, AX          \
	LEAQ (R11)(AX*1), R12

// Units 4h … 4h+3 of the super-block: the 6-bit quants of values 0-15 (Z0) and 16-31 (Z2) of
// each (a lane each), from the low plane's 64 bytes and the high plane's pieces (SEL: VPSHUFD's
// control copying the piece's low (0x44) or high (0xee) qword to both), then ALO, AHI = their
// products with the prepared activations, 4 values per dword. Clobbers Z0 … Z3.
#define Q6KV_HALF(h, SEL, ALO, AHI) \
	VMOVDQU64   (64*h)(SI), Z0            \
	VPSHUFD     $SEL, (64*h)(R12), Z1     \
	VPSRLQ      $4, Z0, Z2                \
	VPSLLVQ     Z29, Z1, Z3               \
	VPANDD      Z30, Z3, Z3               \
	VPTERNLOGD  $0xea, Z3, Z31, Z0        \
	VPSRLVQ     Z28, Z1, Z3               \
	VPANDD      Z30, Z3, Z3               \
	VPTERNLOGD  $0xea, Z3, Z31, Z2        \
	VPXORD      ALO, ALO, ALO             \
	VPXORD      AHI, AHI, AHI             \
	VPDPBUSD    (128*h)(DI), Z0, ALO      \
	VPDPBUSD    (128*h+64)(DI), Z2, AHI

// The super-block's step from Q6KV_HALF's Z4 … Z7: the 16 group sums (lane k: groups 2k, 2k+1,
// 2k+8, 2k+9), less 32·bsums, times the scales, the units' sums S in unit order (exact, as
// q6KDotAVX2's), then acc lanes 8(i mod 4) … +7 = fma(D, float32(S), acc). Clobbers AX,
// Z0 … Z3.
#define Q6KV_STEP \
	VPUNPCKLDQ   Z5, Z4, Z0         \
	VPUNPCKHDQ   Z5, Z4, Z1         \
	VPADDD       Z1, Z0, Z0         \
	VPUNPCKLDQ   Z7, Z6, Z1         \
	VPUNPCKHDQ   Z7, Z6, Z2         \
	VPADDD       Z2, Z1, Z1         \
	VPUNPCKLQDQ  Z1, Z0, Z2         \
	VPUNPCKHQDQ  Z1, Z0, Z3         \
	VPADDD       Z3, Z2, Z0         \
	VPSUBD       256(DI), Z0, Z0    \
	VPMOVSXBD    (BX), Z1           \
	VPERMD       Z1, Z27, Z1        \
	VPMULLD      Z1, Z0, Z0         \
	VPSHUFD      $0xb1, Z0, Z1      \
	VPADDD       Z1, Z0, Z0         \
	VPERMD       Z0, Z26, Z0        \
	VCVTDQ2PS    Y0, Y0             \
	MOVWLZX      (DX)(R10*2), AX    \
	VMOVD        AX, X1             \
	VCVTPH2PS    X1, X1             \
	VMULSS       320(DI), X1, X1    \
	VBROADCASTSS X1, Y1             \
	MOVQ         R10, AX            \
	ANDQ         $3, AX             \
	SHLQ         $5, AX             \
	VMOVUPS      (R8)(AX*1), Y2     \
	VFMADD231PS  Y0, Y1, Y2         \
	VMOVUPS      Y2, (R8)(AX*1)

// func q6KRowsVNNI(w, x *byte, a *rowsArgs, out *float32)
// q6KRowsAVX2 with AVX-512 VNNI; x is the prepared activations.
TEXT ·q6KRowsVNNI(SB), NOSPLIT, $144-32
	MOVQ a+16(FP), R14
	MOVQ w+0(FP), R9
	LEAQ 0(SP), R8
	MOVQ $0, 128(SP)
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z30
	VBROADCASTI32X4 q6kvConst<>+0(SB), Z29
	VBROADCASTI32X4 q6kvConst<>+16(SB), Z28
	VMOVDQU32    q6kvConst<>+32(SB), Z27
	VMOVDQU32    q6kvConst<>+96(SB), Z26
	ROW_ZERO

q6kvrow:
	ROW_START(SI, R11, q6kvpfrow)

q6kvblock:
	ROW_PREFETCH(q6kvpf, q6kvpfdone)
	Q6KV_HIGH
	TESTQ $4, R10
	JNZ   q6kvodd
	Q6KV_HALF(0, 0x44, Z4, Z5)
	Q6KV_HALF(1, 0x44, Z6, Z7)
	JMP   q6kvstep

q6kvodd:
	Q6KV_HALF(0, 0xee, Z4, Z5)
	Q6KV_HALF(1, 0xee, Z6, Z7)

q6kvstep:
	Q6KV_STEP
	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $384, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q6kvblock

	ROW_FOLD(q6kvfold)
	ROW_NEXT(q6kvrow)
	VZEROUPPER
	RET

// The rows form of q4_K with AVX-512 VNNI (q4KRowsVNNI), as q6KRowsVNNI: the activations
// prepared as for q6_K (prepRowsK) but with B_s = bsums[2s] + bsums[2s+1] as int32 at 256.

// the unit sums (dword 4k: unit k, 4k+1: unit 4+k) in unit order
DATA q4kvPerm<>+0(SB)/4, $0
DATA q4kvPerm<>+4(SB)/4, $4
DATA q4kvPerm<>+8(SB)/4, $8
DATA q4kvPerm<>+12(SB)/4, $12
DATA q4kvPerm<>+16(SB)/4, $1
DATA q4kvPerm<>+20(SB)/4, $5
DATA q4kvPerm<>+24(SB)/4, $9
DATA q4kvPerm<>+28(SB)/4, $13
DATA q4kvPerm<>+32(SB)/8, $0
DATA q4kvPerm<>+40(SB)/8, $0
DATA q4kvPerm<>+48(SB)/8, $0
DATA q4kvPerm<>+56(SB)/8, $0
GLOBL q4kvPerm<>(SB), RODATA|NOPTR, $64

// Units 4h … 4h+3 of the super-block: ACC = their Σ q·a, a lane each (4 values per dword; the
// low nibbles, values 0-15, and the high, 16-31, against the prepared activations). Clobbers
// Z0, Z2.
#define Q4KV_HALF(h, ACC) \
	VMOVDQU64   (64*h)(SI), Z0           \
	VPSRLQ      $4, Z0, Z2               \
	VPANDD      Z31, Z0, Z0              \
	VPANDD      Z31, Z2, Z2              \
	VPXORD      ACC, ACC, ACC            \
	VPDPBUSD    (128*h)(DI), Z0, ACC     \
	VPDPBUSD    (128*h+64)(DI), Z2, ACC

// The super-block's step from Q4KV_HALF's Z4, Z5: the units' Σ q·a in unit order, S = sc·Σ q·a
// and M = m·B (exact, as q4KDotAVX2's), then acc lanes 8(i mod 4) … +7 =
// fma(−Dmin, float32(M), fma(D, float32(S), acc)); R12 the row's dmin fields. Clobbers AX,
// Z0 … Z3.
#define Q4KV_STEP \
	VPUNPCKLDQ   Z5, Z4, Z0         \
	VPUNPCKHDQ   Z5, Z4, Z1         \
	VPADDD       Z1, Z0, Z0         \
	VPSHUFD      $0x4e, Z0, Z1      \
	VPADDD       Z1, Z0, Z0         \
	VPERMD       Z0, Z26, Z0        \
	VPMOVZXBD    (BX), Y1           \
	VPMULLD      Y1, Y0, Y0         \
	VCVTDQ2PS    Y0, Y0             \
	VPMOVZXBD    8(BX), Y1          \
	VPMULLD      256(DI), Y1, Y1    \
	VCVTDQ2PS    Y1, Y1             \
	MOVWLZX      (DX)(R10*2), AX    \
	VMOVD        AX, X2             \
	VCVTPH2PS    X2, X2             \
	VMULSS       320(DI), X2, X2    \
	VBROADCASTSS X2, Y2             \
	MOVWLZX      (R12)(R10*2), AX   \
	VMOVD        AX, X3             \
	VCVTPH2PS    X3, X3             \
	VMULSS       320(DI), X3, X3    \
	VBROADCASTSS X3, Y3             \
	MOVQ         R10, AX            \
	ANDQ         $3, AX             \
	SHLQ         $5, AX             \
	VMOVUPS      (R8)(AX*1), Y6     \
	VFMADD231PS  Y0, Y2, Y6         \
	VFNMADD231PS Y1, Y3, Y6         \
	VMOVUPS      Y6, (R8)(AX*1)

// func q4KRowsVNNI(w, x *byte, a *rowsArgs, out *float32)
// q4KRowsAVX2 with AVX-512 VNNI; x is the prepared activations.
TEXT ·q4KRowsVNNI(SB), NOSPLIT, $144-32
	MOVQ a+16(FP), R14
	MOVQ w+0(FP), R9
	LEAQ 0(SP), R8
	MOVQ $0, 128(SP)
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	VMOVDQU32    q4kvPerm<>(SB), Z26
	ROW_ZERO

q4kvrow:
	ROW_START(SI, R12, q4kvpfrow)
	LEAQ (DX)(CX*2), R12 // the dmin fields follow the d fields

q4kvblock:
	ROW_PREFETCH(q4kvpf, q4kvpfdone)
	Q4KV_HALF(0, Z4)
	Q4KV_HALF(1, Z5)
	Q4KV_STEP
	ADDQ $128, SI
	ADDQ $16, BX
	ADDQ $384, DI
	INCQ R10
	CMPQ R10, CX
	JLT  q4kvblock

	ROW_FOLD(q4kvfold)
	ROW_NEXT(q4kvrow)
	VZEROUPPER
	RET
