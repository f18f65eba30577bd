// packed.cuh: the matvec weight formats over the device layout of package repack (read
// repack's package doc first). One struct per weight type:
//
//   layout(cols)          the row's sections: fp16 fields, unpacked scales, quant planes, stride
//   load(row, L, u, k)    the weight registers of unit u = lane + 32k: its plane bytes (one
//                         coalesced load per 16 bytes), fp16 fields and scales
//   apply(acc, W, x, u)   lane l's fold of that unit into its accumulator for one activation row
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

// spread4 moves bits 0 … 3 of h to bit 4 of bytes 0 … 3 (the fifth bit of four q5 values).
PK_FN uint32_t spread4(uint32_t h) {
	return ((h & 1) | (h & 2) << 7 | (h & 4) << 14 | (h & 8) << 21) << 4;
}

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

// Activation words: the 32 int8 quants of unit u as eight little-endian words.
PK_FN void q8k_words(uint32_t *a, const uint8_t *x, int32_t u) { // q8_K, 4-byte aligned
	const uint32_t *p = (const uint32_t *)(x + Q8K_BYTES * (int64_t)(u >> 3) + 4 + 32 * (u & 7));
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = p[m];
}
PK_FN void q8_0_words(uint32_t *a, const uint8_t *x, int32_t u) { // q8_0: 34-byte blocks, 2-byte aligned
	const uint16_t *p = (const uint16_t *)(x + 34 * (int64_t)u + 2);
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = (uint32_t)p[2 * m] | (uint32_t)p[2 * m + 1] << 16;
}
PK_FN void q8_1_words(uint32_t *a, const uint8_t *x, int32_t u) { // q8_1: 36-byte blocks, 4-byte aligned
	const uint32_t *p = (const uint32_t *)(x + 36 * (int64_t)u + 4);
#pragma unroll
	for (int m = 0; m < 8; m++) a[m] = p[m];
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
	struct W {
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
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		float4 b = ((const float4 *)x)[u];
		acc = __fmaf_rn(w.v.x, b.x, acc);
		acc = __fmaf_rn(w.v.y, b.y, acc);
		acc = __fmaf_rn(w.v.z, b.z, acc);
		return __fmaf_rn(w.v.w, b.w, acc);
	}
};

template <float (*DEC)(uint16_t)> struct Pk16 {
	struct W {
		uint4 v;
	};
	PK_FN PkLayout layout(int32_t cols) {
		PkLayout l = {align_up(2 * (int64_t)cols, 256), 0, 0, 0, 0};
		return l;
	}
	PK_FN W load(const uint8_t *row, const PkLayout &, int lane, int32_t u, int32_t) {
		W w = {((const uint4 *)row)[u]};
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint4 b = ((const uint4 *)x)[u];
		uint32_t wa[4] = {w.v.x, w.v.y, w.v.z, w.v.w}, xb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			acc = __fmaf_rn(DEC((uint16_t)wa[k]), DEC((uint16_t)xb[k]), acc);
			acc = __fmaf_rn(DEC((uint16_t)(wa[k] >> 16)), DEC((uint16_t)(xb[k] >> 16)), acc);
		}
		return acc;
	}
};
typedef Pk16<f16_to_f32> PkF16;
typedef Pk16<bf16_to_f32> PkBF16;

// --- legacy formats: one unit per 32-value block; fp16 d (and m) of block u at 2u (2·blocks + 2u).

// Q8_0: S = Σ q_j·a_j; acc = fma(float32(S), d·d_x, acc).
struct PkQ8_0 {
	struct W {
		uint32_t q[8];
		float d;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 32, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 32);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint32_t a[8];
		q8_0_words(a, x, u);
		int32_t s = 0;
#pragma unroll
		for (int m = 0; m < 8; m++) s = dot4(w.q[m], a[m], s);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, f16_at(x + 34 * (int64_t)u)), acc);
	}
};

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
	struct W {
		uint32_t q[4];
		float d;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 16, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint32_t a[8];
		q8_0_words(a, x, u);
		int32_t s = qs4_sum(w.q, a) - 8 * sum_bytes(a);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, f16_at(x + 34 * (int64_t)u)), acc);
	}
};

// Q4_1: S = Σ q_j·a_j; t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct PkQ4_1 {
	struct W {
		uint32_t q[4];
		float d, m;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 0, 1, 32, 16, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.d = f16_at(row + 2 * u);
		w.m = f16_at(row + 2 * (l.blocks + u));
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint32_t a[8];
		q8_1_words(a, x, u);
		const uint8_t *xb = x + 36 * (int64_t)u;
		float t = __fmaf_rn(__int2float_rn(qs4_sum(w.q, a)), __fmul_rn(w.d, f16_at(xb)), __fmul_rn(w.m, f16_at(xb + 2)));
		return __fadd_rn(acc, t);
	}
};

// Q5_0: S = Σ (q_j − 16)·a_j; acc = fma(float32(S), d·d_x, acc).
struct PkQ5_0 {
	struct W {
		uint32_t q[4], qh;
		float d;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 0, 1, 32, 16, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(&w.qh, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * u);
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint32_t a[8];
		q8_0_words(a, x, u);
		int32_t s = qs5_sum(w.q, w.qh, a) - 16 * sum_bytes(a);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(w.d, f16_at(x + 34 * (int64_t)u)), acc);
	}
};

// Q5_1: S = Σ q_j·a_j; t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct PkQ5_1 {
	struct W {
		uint32_t q[4], qh;
		float d, m;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 0, 1, 32, 16, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(&w.qh, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * u);
		w.m = f16_at(row + 2 * (l.blocks + u));
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		uint32_t a[8];
		q8_1_words(a, x, u);
		const uint8_t *xb = x + 36 * (int64_t)u;
		float t = __fmaf_rn(__int2float_rn(qs5_sum(w.q, w.qh, a)), __fmul_rn(w.d, f16_at(xb)),
		                    __fmul_rn(w.m, f16_at(xb + 2)));
		return __fadd_rn(acc, t);
	}
};

// --- K-quants: unit u is sub-block s = u mod 8 of super-block i = u / 8; the fp16 fields of
// block i at 2i (and 2·blocks + 2i), its unpacked scales at scales + SB·i. The combined scales
// D = float32(d·d_x) and Dmin = float32(dmin·d_x) are formed per activation row, as the Go Dot
// forms them per super-block.

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
	struct W {
		uint32_t q[2];
		float d, dmin;
		int32_t sc0, sc1, m0, m1;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 32, 8, 256, 8, 0>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i = u >> 3, s = u & 7;
		plane_load(w.q, row + l.plane0, lane, k, 8);
		w.d = f16_at(row + 2 * i);
		w.dmin = f16_at(row + 2 * (l.blocks + i));
		const uint8_t *sc = row + l.scales + 32 * (int64_t)i;
		w.sc0 = sc[2 * s], w.sc1 = sc[2 * s + 1], w.m0 = sc[16 + 2 * s], w.m1 = sc[17 + 2 * s];
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		const uint8_t *y = x + Q8K_BYTES * (int64_t)(u >> 3);
		int s = u & 7;
		uint32_t a[8];
		q8k_words(a, x, u);
		int32_t s0, s1;
		kq_sums<2, 0>(w.q, w.q, a, &s0, &s1);
		float dy = q8k_d(y);
		float d = __fmul_rn(w.d, dy), dmin = __fmul_rn(w.dmin, dy);
		int32_t sum = w.sc0 * s0 + w.sc1 * s1;
		int32_t msum = w.m0 * q8k_sum(y, 2 * s) + w.m1 * q8k_sum(y, 2 * s + 1);
		float t = __fmaf_rn(d, __int2float_rn(sum), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
};

// Q3_K: with u = low | hbit << 2 (q = u − 4), S = (sc_2s − 32)·(Σ_{l<16} u·a − 4·bsums[2s])
// + (sc_2s+1 − 32)·(Σ_{l≥16} u·a − 4·bsums[2s+1]); acc = fma(D, S, acc). Scales: the 16 raw
// 6-bit values.
struct PkQ3_K {
	struct W {
		uint32_t q[2], h;
		float d;
		int32_t sc0, sc1;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 16, 8, 256, 8, 4>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i = u >> 3, s = u & 7;
		plane_load(w.q, row + l.plane0, lane, k, 8);
		plane_load(&w.h, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * i);
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc0 = (int32_t)sc[2 * s] - 32, w.sc1 = (int32_t)sc[2 * s + 1] - 32;
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		const uint8_t *y = x + Q8K_BYTES * (int64_t)(u >> 3);
		int s = u & 7;
		uint32_t a[8];
		q8k_words(a, x, u);
		int32_t s0, s1;
		kq_sums<2, 1>(w.q, &w.h, a, &s0, &s1);
		s0 -= 4 * q8k_sum(y, 2 * s);
		s1 -= 4 * q8k_sum(y, 2 * s + 1);
		float d = __fmul_rn(w.d, q8k_d(y));
		return __fmaf_rn(d, __int2float_rn(w.sc0 * s0 + w.sc1 * s1), acc);
	}
};

// Q4_K and Q5_K: S = sc_s·Σ q·a, M = m_s·(bsums[2s] + bsums[2s+1]); acc = fma(D, S, acc);
// acc = fma(−Dmin, M, acc). Scales: 8 scales then 8 mins. HB: bits of the high plane.
template <int HB> struct PkK45 {
	struct W {
		uint32_t q[4], h;
		float d, dmin;
		int32_t sc, m;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<2, 16, 8, 256, 16, 4 * HB>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i = u >> 3, s = u & 7;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		w.h = 0;
		if (HB > 0) plane_load(&w.h, row + l.plane1, lane, k, 4);
		w.d = f16_at(row + 2 * i);
		w.dmin = f16_at(row + 2 * (l.blocks + i));
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc = sc[s], w.m = sc[8 + s];
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		const uint8_t *y = x + Q8K_BYTES * (int64_t)(u >> 3);
		int s = u & 7;
		uint32_t a[8];
		q8k_words(a, x, u);
		int32_t s0, s1;
		kq_sums<4, HB>(w.q, &w.h, a, &s0, &s1);
		float dy = q8k_d(y);
		float d = __fmul_rn(w.d, dy), dmin = __fmul_rn(w.dmin, dy);
		int32_t msum = w.m * (q8k_sum(y, 2 * s) + q8k_sum(y, 2 * s + 1));
		float t = __fmaf_rn(d, __int2float_rn(w.sc * (s0 + s1)), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
};
typedef PkK45<0> PkQ4_K;
typedef PkK45<1> PkQ5_K;

// Q6_K: q = low | high << 4 (0 … 63); S = sc_2s·(Σ_{l<16} q·a − 32·bsums[2s])
// + sc_2s+1·(Σ_{l≥16} q·a − 32·bsums[2s+1]) (sc signed); acc = fma(D, S, acc).
struct PkQ6_K {
	struct W {
		uint32_t q[4], h[2];
		float d;
		int32_t sc0, sc1;
	};
	PK_FN PkLayout layout(int32_t cols) { return pk_layout<1, 16, 8, 256, 16, 8>(cols); }
	PK_FN W load(const uint8_t *row, const PkLayout &l, int lane, int32_t u, int32_t k) {
		W w;
		int32_t i = u >> 3, s = u & 7;
		plane_load(w.q, row + l.plane0, lane, k, 16);
		plane_load(w.h, row + l.plane1, lane, k, 8);
		w.d = f16_at(row + 2 * i);
		const uint8_t *sc = row + l.scales + 16 * (int64_t)i;
		w.sc0 = i8_at(sc + 2 * s), w.sc1 = i8_at(sc + 2 * s + 1);
		return w;
	}
	PK_FN float apply(float acc, const W &w, const uint8_t *x, int32_t u) {
		const uint8_t *y = x + Q8K_BYTES * (int64_t)(u >> 3);
		int s = u & 7;
		uint32_t a[8];
		q8k_words(a, x, u);
		int32_t s0, s1;
		kq_sums<4, 2>(w.q, w.h, a, &s0, &s1);
		s0 -= 32 * q8k_sum(y, 2 * s);
		s1 -= 32 * q8k_sum(y, 2 * s + 1);
		float d = __fmul_rn(w.d, q8k_d(y));
		return __fmaf_rn(d, __int2float_rn(w.sc0 * s0 + w.sc1 * s1), acc);
	}
};

// row_dot is one column of the matvec arithmetic (matvec.cu with one column per pass): lane
// lane folds units lane, lane+32, … of packed row wr against activation row xr, and the xor
// butterfly leaves the total in every lane.
template <typename P>
PK_FN float row_dot(const uint8_t *wr, const PkLayout &l, const uint8_t *xr, int32_t units, int lane) {
	float acc = 0.0f;
	int32_t j = 0;
	for (int32_t u = lane; u < units; u += 32, j++) acc = P::apply(acc, P::load(wr, l, lane, u, j), xr, u);
	return warp_sum(acc);
}
