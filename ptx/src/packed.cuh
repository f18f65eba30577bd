// packed.cuh: the matvec weight formats over the device layout of package repack (read
// repack's package doc first). One struct per weight type:
//
//   layout(cols)          the row's sections: fp16 fields, unpacked scales, quant planes, stride
//   load(row, L, u, k)    the weight registers of unit u = lane + 32k: its plane bytes (one
//                         coalesced load per 16 bytes), fp16 fields and scales
//   apply(acc, W, x, u)   lane l's fold of that unit into its accumulator for one activation row
//   xat(x, u)             unit u's activations of a row on their own (the quantised formats: what
//                         matvec8's staged form copies to shared memory)
//
// A matvec loads a unit once and applies it to every column of the pass, so a weight byte is
// read once per MaxColumns columns. apply is the float arithmetic of the format's Go Dot,
// rounding for rounding (the per-format comments of formats.cuh and q4_0.go … q6_k.go);
// integer sums of quant products are exact, so they are formed in any order — four products
// at a time with dp4a where the device has it. Every quant is below 128, so its byte is the same
// as an unsigned or a signed int8.
//
// In a packed plane with b bits per value, a unit has 4b bytes and value l lies in byte
// l mod 4b at bit b·⌊l/4b⌋. Word m of the unit, shifted right by b·t and masked to b bits per
// byte, thus holds values 4(m + b·t) … +3: the four activations of q8 word m + b·t. Groups
// g = 0 … 7 of four values take word g mod b at shift b·⌊g/b⌋ (word_group below).
#pragma once

#include "formats.cuh"
#include "grid.cuh"

#define PK_FN static __device__ __forceinline__

// dot4 is Σ_k a_k·b_k over the four signed bytes of a and b, plus c (exact).
PK_FN int32_t dot4(uint32_t a, uint32_t b, int32_t c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
	return __dp4a((int)a, (int)b, c);
#else
	return c + (int32_t)(int8_t)a * (int32_t)(int8_t)b + (int32_t)(int8_t)(a >> 8) * (int32_t)(int8_t)(b >> 8) +
	       (int32_t)(int8_t)(a >> 16) * (int32_t)(int8_t)(b >> 16) + (int32_t)(int8_t)(a >> 24) * (int32_t)(int8_t)(b >> 24);
#endif
}

// word_group returns the four b-bit values of group g (values 4g … 4g+3) of a unit held in
// words w[0 … b−1], one per byte.
template <int B> PK_FN uint32_t word_group(const uint32_t *w, int g) {
	const uint32_t mask = 0x01010101u * ((1u << B) - 1);
	return (w[g % B] >> (B * (g / B))) & mask;
}

// spread4 moves bits 0 … 3 of h to bit 4 of bytes 0 … 3 (the fifth bit of four q5 values): the
// product adds h's four bits shifted by 4, 11, 18 and 25, whose sets of positions are disjoint
// (no carries), and bit b of h lands at 8b + 4.
PK_FN uint32_t spread4(uint32_t h) { return ((h & 0xfu) * 0x02040810u) & 0x10101010u; }

// Plane loads: the width-byte unit k of lane `lane` (unit lane + 32k) of a plane at p.
PK_FN void plane_load(uint32_t *w, const uint8_t *p, int lane, int32_t k, int width) {
	if (width == 32) {
		uint4 a = *(const uint4 *)(p + 512 * (int64_t)(2 * k) + 16 * lane);
		uint4 b = *(const uint4 *)(p + 512 * (int64_t)(2 * k + 1) + 16 * lane);
		w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
	} else if (width == 16) {
		uint4 a = *(const uint4 *)(p + 512 * (int64_t)k + 16 * lane);
		w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
	} else if (width == 8) {
		uint2 a = *(const uint2 *)(p + 512 * (int64_t)(k >> 1) + 16 * lane + 8 * (k & 1));
		w[0] = a.x, w[1] = a.y;
	} else {
		w[0] = *(const uint32_t *)(p + 512 * (int64_t)(k >> 2) + 16 * lane + 4 * (k & 3));
	}
}

PK_FN int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// Prefetches: a hint that asks the L2 for the line holding an address, issued ahead of the
// load that needs it, so that a lane's wait for that load is an L2 hit rather than a DRAM
// round trip — memory-level parallelism without the registers a deeper ring of loads would
// hold. They change no value. The megakernel stages its weights itself (grid_stage), so its
// instantiations of the bodies ask for nothing.
PK_FN void pk_prefetch(const uint8_t *p) {
#if defined(__CUDA_ARCH__) && !defined(MEGAKERNEL)
	l2_prefetch(p);
#endif
}

// MV_PREFETCH is how many chunks (a unit of each lane: 32 units) ahead of its loads a matvec
// warp asks the L2 for its rows' plane bytes. A lane's fold of a chunk takes a resident warp
// at least ~100 cycles (16 warps share the SM's 4 schedulers), so eight chunks cover a DRAM
// round trip; device/perf prices the waits of a prefetched stream at the L2's latency.
#define MV_PREFETCH 8

// PkLayout is repack.Layout for one row (offsets from the row's start).
struct PkLayout {
	int64_t stride;  // bytes per row (RowStride)
	int64_t blocks;  // blocks per row
	int64_t scales;  // ScaleOff
	int64_t plane0;  // Planes[0].Off
	int64_t plane1;  // Planes[1].Off
};

// pk_layout mirrors repack.NewLayout: NF fp16 fields per block, SB unpacked scale bytes per
// block, UPB units per block of BV values, planes of W0 and W1 bytes per unit (W1 = 0: none).
template <int NF, int SB, int UPB, int BV, int W0, int W1> PK_FN PkLayout pk_layout(int32_t cols) {
	PkLayout l;
	l.blocks = cols / BV;
	int64_t units = l.blocks * UPB, per_lane = (units + 31) / 32;
	l.scales = align_up(2 * NF * l.blocks, 16);
	int64_t end = l.scales + SB * l.blocks;
	l.plane0 = align_up(end, 128);
	end = l.plane0 + (per_lane * W0 + 15) / 16 * 512;
	l.plane1 = 0;
	if (W1 > 0) {
		l.plane1 = align_up(end, 128);
		end = l.plane1 + (per_lane * W1 + 15) / 16 * 512;
	}
	l.stride = align_up(end, 256);
	return l;
}

// Activation words: the 32 int8 quants of unit s of super-block i as eight little-endian words.
PK_FN void q8k_words(uint32_t *a, const uint8_t *x, int32_t i, int s) { // q8_K, 4-byte aligned
	const uint32_t *p = (const uint32_t *)(x + Q8K_BYTES * (int64_t)i + 4 + 32 * s);
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = p[m];
}
// q8_0_load reads block u of a q8_0 row (34-byte blocks, 2-byte aligned: a row follows the
// one before it directly, 34·blocks bytes on) with aligned 32-bit loads, and returns its d
// (fp16 bits). A block that starts at a word boundary: its first word holds d and q0 q1, each
// quant word straddles two loaded words (a funnel shift joins them), and its last two quant
// bytes are read alone, so that no load passes the block's end. A block that starts 2 bytes
// past one: the word before holds d in its high half (and the block before's last bytes, or,
// for a buffer's first block, nothing: buffers are word-aligned) and the next eight words are
// its quants.
PK_FN uint16_t q8_0_load(uint32_t *a, const uint8_t *x, int32_t u) {
	const uint8_t *b = x + 34 * (int64_t)u;
	bool odd = ((uintptr_t)b & 2) != 0;
	const uint32_t *p = (const uint32_t *)((uintptr_t)b & ~(uintptr_t)3);
	uint32_t v[9];
#pragma unroll
	for (int m = 0; m < 8; m++) v[m] = p[m];
	const uint16_t *t = (const uint16_t *)(p + 8);
	v[8] = (uint32_t)t[0] | (odd ? (uint32_t)t[1] << 16 : 0u);
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = odd ? v[m + 1] : __funnelshift_r(v[m], v[m + 1], 16);
	return (uint16_t)(odd ? v[0] >> 16 : v[0]);
}
PK_FN void q8_1_words(uint32_t *a, const uint8_t *x, int32_t u) { // q8_1: 36-byte blocks, 4-byte aligned
	const uint32_t *p = (const uint32_t *)(x + 36 * (int64_t)u + 4);
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = p[m];
}
// q8_1_ds is the fp16 d (low half) and s (high half) of q8_1 block u, as one word.
PK_FN uint32_t q8_1_ds(const uint8_t *x, int32_t u) { return *(const uint32_t *)(x + 36 * (int64_t)u); }

// q8k_bsums returns bsums[2s] and bsums[2s+1] of q8_K block y — unit s's two 16-value sums —
// from one aligned 32-bit load.
PK_FN void q8k_bsums(const uint8_t *y, int s, int32_t *b0, int32_t *b1) {
	uint32_t v = *(const uint32_t *)(y + 260 + 4 * s);
	*b0 = (int32_t)(int16_t)v, *b1 = (int32_t)(int16_t)(v >> 16);
}

// sum_bytes is Σ of the 32 int8 activations (exact).
PK_FN int32_t sum_bytes(const uint32_t *a) {
	int32_t s = 0;
#pragma unroll
	for (int m = 0; m < 8; m++) s = dot4(a[m], 0x01010101u, s);
	return s;
}

// --- float formats: rows are the GGUF bytes, RowStride apart.

struct PkF32 {
	static const int PW0 = 16, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		float4 v;
	};
	struct X {
		float4 v;
	};
	PK_FN PkLayout layout(int32_t cols) {
		PkLayout l = {align_up(4 * (int64_t)cols, 256), 0, 0, 0, 0};
		return l;
	}
	PK_FN W load(const uint8_t *row, const PkLayout &, int lane, int32_t u, int32_t) {
		W w = {((const float4 *)row)[u]};
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) {
		X a = {((const float4 *)x)[u]};
		return a;
	}
	PK_FN float apply(float acc, const W &w, const X &b) {
		acc = __fmaf_rn(w.v.x, b.v.x, acc);
		acc = __fmaf_rn(w.v.y, b.v.y, acc);
		acc = __fmaf_rn(w.v.z, b.v.z, acc);
		return __fmaf_rn(w.v.w, b.v.w, acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// f16_fold_to_f32 widens an fp16 value for a fold (a product or a sum): by the hardware
// alone, exact for every finite and infinite value. A NaN's payload may not be kept, which no
// fold can show: every arithmetic result of a NaN is the canonical NaN, on the device and in
// the twin (num's contract), so f16_to_f32's payload-keeping widening gives the same bits.
PK_FN float f16_fold_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
#else
	return f16_to_f32(h);
#endif
}

// Pk16: fp16 (F16 true) or bf16 weights and activations, widened for the folds
// (f16_fold_to_f32, bf16_to_f32).
template <bool F16> struct Pk16 {
	static const int PW0 = 16, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		uint4 v;
	};
	struct X {
		uint4 v;
	};
	PK_FN float dec(uint16_t h) { return F16 ? f16_fold_to_f32(h) : bf16_to_f32(h); }
	PK_FN PkLayout layout(int32_t cols) {
		PkLayout l = {align_up(2 * (int64_t)cols, 256), 0, 0, 0, 0};
		return l;
	}
	PK_FN W load(const uint8_t *row, const PkLayout &, int lane, int32_t u, int32_t) {
		W w = {((const uint4 *)row)[u]};
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) {
		X a = {((const uint4 *)x)[u]};
		return a;
	}
	PK_FN float apply(float acc, const W &w, const X &b) {
		uint32_t wa[4] = {w.v.x, w.v.y, w.v.z, w.v.w}, xb[4] = {b.v.x, b.v.y, b.v.z, b.v.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			acc = __fmaf_rn(dec((uint16_t)wa[k]), dec((uint16_t)xb[k]), acc);
			acc = __fmaf_rn(dec((uint16_t)(wa[k] >> 16)), dec((uint16_t)(xb[k] >> 16)), acc);
		}
		return acc;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};
typedef Pk16<true> PkF16;
typedef Pk16<false> PkBF16;

// --- legacy formats: one unit per 32-value block; fp16 d (and m) of block u at 2u (2·blocks + 2u).

// Q8Act: a q8_0 unit (block u: 32 quants as words and d) or a q8_1 one (with s).
struct Q8Act {
	uint32_t a[8];
	float d, s;
};

PK_FN Q8Act q8_0_act(const uint8_t *x, int32_t u) {
	Q8Act a;
	a.d = f16_to_f32(q8_0_load(a.a, x, u));
	a.s = 0.0f;
	return a;
}

PK_FN Q8Act q8_1_act(const uint8_t *x, int32_t u) {
	Q8Act a;
	q8_1_words(a.a, x, u);
	uint32_t ds = q8_1_ds(x, u);
	a.d = f16_to_f32((uint16_t)ds), a.s = f16_to_f32((uint16_t)(ds >> 16));
	return a;
}

// Q8_0: S = Σ q_j·a_j; acc = fma(float32(S), d·d_x, acc).
struct PkQ8_0 {
	static const int PW0 = 32, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[8];
		float d;
	};
	typedef Q8Act X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 32, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 32);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	// matvec8's MMA form (matvec.cu): a unit's quants are MMA_SEGS 16-byte pieces of the plane;
	// lane t of a row's group reads 8 bytes, piece mma_piece(t) at byte mma_off(t), and mma_a
	// makes them the int8 values of the unit's positions 8t … 8t+7 (here: the bytes themselves)
	static const int MMA_SEGS = 2;
	PK_FN int mma_piece(int t) { return t >> 1; }
	PK_FN int mma_off(int t) { return 8 * (t & 1); }
	PK_FN uint2 mma_a(uint2 v, int) { return v; }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s = 0;
#pragma unroll
		for (int m = 0; m < 8; m++) s = dot4(w.q[m], x.a[m], s);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, x.d), acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// nibbles_less8 is the low nibble q of each byte of v as the int8 q − 8 (q + 0x78 is 0x78 …
// 0x87, whose top bit flipped is q − 8 in two's complement: no carry crosses a byte).
PK_FN uint32_t nibbles_less8(uint32_t v) { return ((v & 0x0f0f0f0fu) + 0x78787878u) ^ 0x80808080u; }

// qs4_sum is Σ q_j·a_j for ggml's 16-byte nibble layout (byte j: value j low, j+16 high).
PK_FN int32_t qs4_sum(const uint32_t *q, const uint32_t *a) {
	int32_t s = 0;
#pragma unroll
	for (int m = 0; m < 4; m++) {
		s = dot4(q[m] & 0x0f0f0f0fu, a[m], s);
		s = dot4((q[m] >> 4) & 0x0f0f0f0fu, a[4 + m], s);
	}
	return s;
}

// qs5_sum is qs4_sum with the fifth bits of qh (bit j: value j).
PK_FN int32_t qs5_sum(const uint32_t *q, uint32_t qh, const uint32_t *a) {
	int32_t s = 0;
#pragma unroll
	for (int m = 0; m < 4; m++) {
		s = dot4((q[m] & 0x0f0f0f0fu) | spread4(qh >> (4 * m)), a[m], s);
		s = dot4(((q[m] >> 4) & 0x0f0f0f0fu) | spread4(qh >> (16 + 4 * m)), a[4 + m], s);
	}
	return s;
}

// Q4_0: S = Σ (q_j − 8)·a_j; acc = fma(float32(S), d·d_x, acc).
struct PkQ4_0 {
	static const int PW0 = 16, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4];
		float d;
	};
	typedef Q8Act X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 16, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	// the MMA form's A (see PkQ8_0): positions 8t … 8t+7 are the low nibbles of bytes 8t … 8t+7
	// (t < 2) or the high nibbles of bytes 8(t−2) …, each q − 8 as an int8: Σ (q − 8)·a is the
	// S above, exactly
	static const int MMA_SEGS = 1;
	PK_FN int mma_piece(int) { return 0; }
	PK_FN int mma_off(int t) { return 8 * (t & 1); }
	PK_FN uint2 mma_a(uint2 v, int t) {
		const int sh = 4 * (t >> 1);
		return make_uint2(nibbles_less8(v.x >> sh), nibbles_less8(v.y >> sh));
	}
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s = qs4_sum(w.q, x.a) - 8 * sum_bytes(x.a);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, x.d), acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// Q4_1: S = Σ q_j·a_j; t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct PkQ4_1 {
	static const int PW0 = 16, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4];
		float d, m;
	};
	typedef Q8Act X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 0, 1, 32, 16, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.d = f16_at(row + 2 * u);
		w.m = f16_at(row + 2 * (l.blocks + u));
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) { return q8_1_act(x, u); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8_1_act(x, u); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		float t = __fmaf_rn(__int2float_rn(qs4_sum(w.q, x.a)), __fmul_rn(w.d, x.d), __fmul_rn(w.m, x.s));
		return __fadd_rn(acc, t);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// Q5_0: S = Σ (q_j − 16)·a_j; acc = fma(float32(S), d·d_x, acc).
struct PkQ5_0 {
	static const int PW0 = 16, PW1 = 4; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4], qh;
		float d;
	};
	typedef Q8Act X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 16, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(&w.qh, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8_0_act(x, u); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s = qs5_sum(w.q, w.qh, x.a) - 16 * sum_bytes(x.a);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, x.d), acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// Q5_1: S = Σ q_j·a_j; t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct PkQ5_1 {
	static const int PW0 = 16, PW1 = 4; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4], qh;
		float d, m;
	};
	typedef Q8Act X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 0, 1, 32, 16, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(&w.qh, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * u);
		w.m = f16_at(row + 2 * (l.blocks + u));
		return w;
	}
	PK_FN X xload(const W &, const uint8_t *x, int32_t u) { return q8_1_act(x, u); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8_1_act(x, u); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		float t = __fmaf_rn(__int2float_rn(qs5_sum(w.q, w.qh, x.a)), __fmul_rn(w.d, x.d), __fmul_rn(w.m, x.s));
		return __fadd_rn(acc, t);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// --- K-quants: unit u is sub-block s = u mod 8 of super-block i = u / 8; the fp16 fields of
// block i at 2i (and 2·blocks + 2i), its unpacked scales at scales + SB·i. The combined scales
// D = float32(d·d_x) and Dmin = float32(dmin·d_x) are formed per activation row, as the Go Dot
// forms them per super-block. A lane's units are u = lane + 32k, so s = lane mod 8 and
// i = lane/8 + 4k (kq_unit): every address is the lane's first plus a multiple of k, which the
// compiler advances by a constant instead of recomputing.

// kq_unit sets the super-block and sub-block of unit lane + 32k.
PK_FN void kq_unit(int lane, int32_t k, int32_t *i, int *s) { *i = (lane >> 3) + 4 * k, *s = lane & 7; }

// KAct is a q8_K unit: sub-block s of super-block y, its quants as words, the block's d and
// the unit's two 16-value sums.
struct KAct {
	uint32_t a[8];
	float d;
	int32_t b0, b1;
};

PK_FN KAct q8k_act(const uint8_t *x, int32_t i, int s) {
	KAct a;
	const uint8_t *y = x + Q8K_BYTES * (int64_t)i;
	q8k_words(a.a, x, i, s);
	a.d = q8k_d(y);
	q8k_bsums(y, s, &a.b0, &a.b1);
	return a;
}

// Staged activations (matvec8's staged form, matvec.cu): a unit's activations as 40 bytes of
// shared memory — its 32 quants in two 16-byte halves and two aux words (Q8Act: d, s; KAct: d
// and the two 16-bit sums in one word) — which a lane reads back with two 16-byte loads and one
// 8-byte load. Packing moves bits only, so an unpacked unit is the unit as xload reads it.
PK_FN void x_pack(const uint32_t *a, uint4 *lo, uint4 *hi) {
	*lo = make_uint4(a[0], a[1], a[2], a[3]);
	*hi = make_uint4(a[4], a[5], a[6], a[7]);
}
PK_FN void x_unpack(uint32_t *a, uint4 lo, uint4 hi) {
	a[0] = lo.x, a[1] = lo.y, a[2] = lo.z, a[3] = lo.w, a[4] = hi.x, a[5] = hi.y, a[6] = hi.z, a[7] = hi.w;
}
PK_FN void x_pack(const Q8Act &x, uint4 *lo, uint4 *hi, float2 *aux) {
	x_pack(x.a, lo, hi);
	*aux = make_float2(x.d, x.s);
}
PK_FN void x_unpack(Q8Act *x, uint4 lo, uint4 hi, float2 aux) {
	x_unpack(x->a, lo, hi);
	x->d = aux.x, x->s = aux.y;
}
PK_FN void x_pack(const KAct &x, uint4 *lo, uint4 *hi, float2 *aux) {
	x_pack(x.a, lo, hi);
	*aux = make_float2(x.d, __uint_as_float(((uint32_t)x.b0 & 0xffffu) | (uint32_t)x.b1 << 16));
}
PK_FN void x_unpack(KAct *x, uint4 lo, uint4 hi, float2 aux) {
	x_unpack(x->a, lo, hi);
	uint32_t b = __float_as_uint(aux.y);
	x->d = aux.x, x->b0 = (int32_t)(int16_t)b, x->b1 = (int32_t)(int16_t)(b >> 16);
}

// kq_sums returns the two 16-value halves' Σ q·a of a unit whose quants are
// low | high << LB, from planes of LB and HB bits (HB = 0: no high plane).
template <int LB, int HB> PK_FN void kq_sums(const uint32_t *lo, const uint32_t *hi, const uint32_t *a, int32_t *s0,
                                             int32_t *s1) {
	int32_t x0 = 0, x1 = 0;
#pragma unroll
	for (int g = 0; g < 8; g++) {
		uint32_t q = word_group<LB>(lo, g);
		if (HB > 0) q |= word_group<(HB > 0 ? HB : 1)>(hi, g) << LB;
		if (g < 4)
			x0 = dot4(q, a[g], x0);
		else
			x1 = dot4(q, a[g], x1);
	}
	*s0 = x0, *s1 = x1;
}

// Q2_K: S = sc_2s·Σ_{l<16} q·a + sc_2s+1·Σ_{l≥16} q·a, M = m_2s·bsums[2s] + m_2s+1·bsums[2s+1];
// acc = fma(D, S, acc); acc = fma(−Dmin, M, acc). Scales: 16 scales then 16 mins.
struct PkQ2_K {
	static const int PW0 = 8, PW1 = 0; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[2];
		float d, dmin;
		int32_t sc0, sc1, m0, m1;
		int32_t i, s; // the unit's super-block and sub-block
	};
	typedef KAct X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 32, 8, 256, 8, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i;
		int s;
		kq_unit(lane, k, &i, &s);
		w.i = i, w.s = s;
		plane_load(w.q, row + l.plane0, lane, k, 8);
		w.d = f16_at(row + 2 * i);
		w.dmin = f16_at(row + 2 * (l.blocks + i));
		const uint8_t *sc = row + l.scales + 32 * (int64_t)i;
		w.sc0 = sc[2 * s], w.sc1 = sc[2 * s + 1], w.m0 = sc[16 + 2 * s], w.m1 = sc[17 + 2 * s];
		return w;
	}
	PK_FN X xload(const W &w, const uint8_t *x, int32_t) { return q8k_act(x, w.i, w.s); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8k_act(x, u >> 3, u & 7); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s0, s1;
		kq_sums<2, 0>(w.q, w.q, x.a, &s0, &s1);
		float d = __fmul_rn(w.d, x.d), dmin = __fmul_rn(w.dmin, x.d);
		int32_t sum = w.sc0 * s0 + w.sc1 * s1;
		int32_t msum = w.m0 * x.b0 + w.m1 * x.b1;
		float t = __fmaf_rn(d, __int2float_rn(sum), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// Q3_K: with u = low | hbit << 2 (q = u − 4), S = (sc_2s − 32)·(Σ_{l<16} u·a − 4·bsums[2s])
// + (sc_2s+1 − 32)·(Σ_{l≥16} u·a − 4·bsums[2s+1]); acc = fma(D, S, acc). Scales: the 16 raw
// 6-bit values.
struct PkQ3_K {
	static const int PW0 = 8, PW1 = 4; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[2], h;
		float d;
		int32_t sc0, sc1;
		int32_t i, s; // the unit's super-block and sub-block
	};
	typedef KAct X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 16, 8, 256, 8, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i;
		int s;
		kq_unit(lane, k, &i, &s);
		w.i = i, w.s = s;
		plane_load(w.q, row + l.plane0, lane, k, 8);
		plane_load(&w.h, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * i);
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc0 = (int32_t)sc[2 * s] - 32, w.sc1 = (int32_t)sc[2 * s + 1] - 32;
		return w;
	}
	PK_FN X xload(const W &w, const uint8_t *x, int32_t) { return q8k_act(x, w.i, w.s); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8k_act(x, u >> 3, u & 7); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s0, s1;
		kq_sums<2, 1>(w.q, &w.h, x.a, &s0, &s1);
		s0 -= 4 * x.b0;
		s1 -= 4 * x.b1;
		float d = __fmul_rn(w.d, x.d);
		return __fmaf_rn(d, __int2float_rn(w.sc0 * s0 + w.sc1 * s1), acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// Q4_K and Q5_K: S = sc_s·Σ q·a, M = m_s·(bsums[2s] + bsums[2s+1]); acc = fma(D, S, acc);
// acc = fma(−Dmin, M, acc). Scales: 8 scales then 8 mins. HB: bits of the high plane.
template <int HB> struct PkK45 {
	static const int PW0 = 16, PW1 = 4 * HB; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4], h;
		float d, dmin;
		int32_t sc, m;
		int32_t i, s; // the unit's super-block and sub-block
	};
	typedef KAct X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 16, 8, 256, 16, 4 * HB>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i;
		int s;
		kq_unit(lane, k, &i, &s);
		w.i = i, w.s = s;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.h = 0;
		if (HB > 0) plane_load(&w.h, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * i);
		w.dmin = f16_at(row + 2 * (l.blocks + i));
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc = sc[s], w.m = sc[8 + s];
		return w;
	}
	PK_FN X xload(const W &w, const uint8_t *x, int32_t) { return q8k_act(x, w.i, w.s); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8k_act(x, u >> 3, u & 7); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s0, s1;
		kq_sums<4, HB>(w.q, &w.h, x.a, &s0, &s1);
		float d = __fmul_rn(w.d, x.d), dmin = __fmul_rn(w.dmin, x.d);
		int32_t msum = w.m * (x.b0 + x.b1);
		float t = __fmaf_rn(d, __int2float_rn(w.sc * (s0 + s1)), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};
typedef PkK45<0> PkQ4_K;
typedef PkK45<1> PkQ5_K;

// Q6_K: q = low | high << 4 (0 … 63); S = sc_2s·(Σ_{l<16} q·a − 32·bsums[2s])
// + sc_2s+1·(Σ_{l≥16} q·a − 32·bsums[2s+1]) (sc signed); acc = fma(D, S, acc).
struct PkQ6_K {
	static const int PW0 = 16, PW1 = 8; // plane widths (pk_prefetch_lines)
	struct W {
		uint32_t q[4], h[2];
		float d;
		int32_t sc0, sc1;
		int32_t i, s; // the unit's super-block and sub-block
	};
	typedef KAct X;
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 16, 8, 256, 16, 8>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i;
		int s;
		kq_unit(lane, k, &i, &s);
		w.i = i, w.s = s;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(w.h, row + l.plane1, lane, k, 8);
		w.d = f16_at(row + 2 * i);
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc0 = i8_at(sc + 2 * s), w.sc1 = i8_at(sc + 2 * s + 1);
		return w;
	}
	PK_FN X xload(const W &w, const uint8_t *x, int32_t) { return q8k_act(x, w.i, w.s); }
	PK_FN X xat(const uint8_t *x, int32_t u) { return q8k_act(x, u >> 3, u & 7); }
	PK_FN float apply(float acc, const W &w, const X &x) {
		int32_t s0, s1;
		kq_sums<4, 2>(w.q, w.h, x.a, &s0, &s1);
		s0 -= 32 * x.b0;
		s1 -= 32 * x.b1;
		float d = __fmul_rn(w.d, x.d);
		return __fmaf_rn(d, __int2float_rn(w.sc0 * s0 + w.sc1 * s1), acc);
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) { return apply(acc, w, xload(w, x, u)); }
};

// plane_prefetch asks for the lines chunk k (units lane + 32k of a warp's lanes) of a plane
// of W bytes a unit spans at p: 32 units' bytes, or, for a narrower plane (the units of
// 16 / W chunks interleaved in 16-byte groups), the four lines they share, asked for with the
// first of those chunks. Every lane asks for line lane mod 4 of each 512 bytes: the warp's
// request names four lines, as its loads of the chunk do.
template <int W> PK_FN void plane_prefetch(const uint8_t *p, int lane, int32_t k) {
	const int share = W > 0 && W < 16 ? 16 / W : 1; // the chunks sharing a 16-byte group
	if (W >= 16) {
#pragma unroll
		for (int h = 0; h < W / 16; h++) pk_prefetch(p + 512 * ((int64_t)k * (W / 16) + h) + 128 * (lane & 3));
	} else if (W > 0 && k % share == 0) {
		pk_prefetch(p + 512 * (int64_t)(k / share) + 128 * (lane & 3));
	}
}

// pk_prefetch_lines asks for chunk k of `rows` (≤ MAXR) consecutive packed rows from row0.
// PW0 and PW1 are the bytes a unit has in plane0 (a float format's row is its plane0) and
// plane1.
template <typename P, int MAXR>
PK_FN void pk_prefetch_lines(const uint8_t *row0, const PkLayout &l, int32_t rows, int lane, int32_t k) {
#pragma unroll
	for (int i = 0; i < MAXR; i++) {
		if (i >= rows) break;
		plane_prefetch<P::PW0>(row0 + i * l.stride + l.plane0, lane, k);
		plane_prefetch<P::PW1>(row0 + i * l.stride + l.plane1, lane, k);
	}
}

// pk_prefetch_start asks for the head of each of `rows` rows from row0 (≤ MAXR) — its fp16
// fields and scales, the bytes before its first plane, up to 8 KB: larger heads are read on
// demand — and for their MV_PREFETCH chunks from `from` (those past the last, chunks, left
// out); a fold then asks for chunk k + MV_PREFETCH as it loads chunk k. Straight code: the
// static model counts a loop by the bytes its loads move.
template <typename P, int MAXR>
PK_FN void pk_prefetch_start(const uint8_t *row0, const PkLayout &l, int32_t rows, int lane, int32_t from, int32_t chunks) {
#pragma unroll
	for (int i = 0; i < MAXR; i++) {
		if (i >= rows) break;
#pragma unroll
		for (int h = 0; h < 2; h++)
			if (128 * (lane + 32 * h) < l.plane0) pk_prefetch(row0 + i * l.stride + 128 * (lane + 32 * h));
	}
#pragma unroll
	for (int k = 0; k < MV_PREFETCH; k++)
		if (from + k < chunks) pk_prefetch_lines<P, MAXR>(row0, l, rows, lane, from + k);
}

// row_fold is lane lane's part of one column of the matvec arithmetic (matvec.cu with one
// column per pass): it folds units lane, lane+32, … of packed row wr against activation row xr
// in that order, from +0, keeping AH units' loads in flight: the units k ≡ d (mod AH) go
// through buffer d, each folded and then refilled in place (a ring shifted a register set a
// fold would wait for the newest loads at every fold).
// With PF and pf it asks the L2 for the row's chunks MV_PREFETCH ahead of its loads (pf: the
// first column of a pass; the others find the row in the caches).
template <typename P, int AH, bool PF = false>
PK_FN float row_fold(const uint8_t *wr, const PkLayout &l, const uint8_t *xr, int32_t units, int lane, bool pf = false) {
	typename P::W w[AH] = {};
	typename P::X x[AH] = {};
	const int32_t chunks = (units + 31) / 32;
	pf = PF && pf;
	if (pf) pk_prefetch_start<P, 1>(wr, l, 1, lane, AH, chunks);
#pragma unroll
	for (int d = 0; d < AH; d++) {
		int32_t u = lane + 32 * d;
		if (u < units) {
			w[d] = P::load(wr, l, lane, u, d);
			x[d] = P::xload(w[d], xr, u);
		}
	}
	float acc = 0.0f;
#pragma unroll 1
	for (int32_t k = 0; lane + 32 * k < units; k += AH) {
#pragma unroll
		for (int d = 0; d < AH; d++) {
			int32_t u = lane + 32 * (k + d);
			if (u < units) {
				acc = P::apply(acc, w[d], x[d]);
				int32_t un = u + 32 * AH;
				if (un < units) {
					if (pf && k + d + AH + MV_PREFETCH < chunks) pk_prefetch_lines<P, 1>(wr, l, 1, lane, k + d + AH + MV_PREFETCH);
					w[d] = P::load(wr, l, lane, un, k + d + AH);
					x[d] = P::xload(w[d], xr, un);
				}
			}
		}
	}
	return acc;
}

// ROW_AHEAD is the units in flight a lane of the grouped MoE kernels (moe.cu):
// one in the megakernel, whose every body must fit its register budget.
#ifdef MEGAKERNEL
#define ROW_AHEAD 1
#else
#define ROW_AHEAD 2
#endif

// row_dot is one column of the matvec arithmetic, a unit at a time (the order of row_fold), the
// xor butterfly leaving the total in every lane.
template <typename P>
PK_FN float row_dot(const uint8_t *wr, const PkLayout &l, const uint8_t *xr, int32_t units, int lane) {
	float acc = 0.0f;
	int32_t j = 0;
	for (int32_t u = lane; u < units; u += 32, j++) acc = P::apply(acc, P::load(wr, l, lane, u, j), xr, u);
	return warp_sum(acc);
}
