// formats.cuh: the weight formats of device/kernels (one struct per kernels.Format), for the
// matvec and embed kernels: the bytes of a weight row and of an activation row, the unit size,
// the unit step — lane l's fold of unit u into its accumulator, acc = step(acc, w_row, x_row, u)
// — and value(w_row, i), value i of a weight row as the format's Go Decode gives it, computed on
// its own with the Decode's float steps and roundings.
// The steps read GGUF-layout rows: they are the C++ statement of each Go Dot, checked against it
// by ptx's host tests, and the reference for packed.cuh, whose apply functions the matvec kernels
// use over the repacked layout with the same float steps.
// Each step mirrors the per-unit float steps of its format's Go Dot (f32.go, f16.go, bf16.go,
// q4_0.go … q6_k.go, which state them in their doc comments): integer sums of quant products
// are exact, so their order is free; every float step is the twin's, rounding for rounding.
//
// Blocks are read with byte loads and 2-byte (fp16, int16) and 4-byte (float) loads at their
// natural alignment; f32, f16 and bf16 units with 16-byte loads (rows and buffers 16-byte
// aligned, as the allocator and the row lengths the Go specs accept make them).
#pragma once

#include "num.cuh"

#define FMT_FN static __device__ __forceinline__

FMT_FN float f16_at(const uint8_t *p) { return f16_to_f32(*(const uint16_t *)p); }
FMT_FN int32_t i8_at(const uint8_t *p) { return (int32_t)(int8_t)*p; }

// --- q8_K activations (kquant.go): [0:4] d float32, [4:260] 256 int8 quants, [260:292] 16 int16 sums

#define Q8K_BYTES 292
FMT_FN float q8k_d(const uint8_t *y) { return *(const float *)y; }
FMT_FN const uint8_t *q8k_qs(const uint8_t *y, int s) { return y + 4 + 32 * s; } // unit s's 32 quants
FMT_FN int32_t q8k_sum(const uint8_t *y, int j) { return (int32_t) * (const int16_t *)(y + 260 + 2 * j); }

// scale_min_k4 mirrors kernels' scaleMinK4: 6-bit scale and min of sub-block j of q4_K / q5_K.
FMT_FN void scale_min_k4(int j, const uint8_t *q, int32_t *sc, int32_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// F32 (f32.go): unit 4 values; acc = fma(w[i], x[i], acc) for its values in order.
struct FmtF32 {
	static const int UNIT = 4;
	FMT_FN int64_t row_bytes(int32_t cols) { return 4 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 4 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return __uint_as_float(((const uint32_t *)w)[i]); }
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		float4 a = ((const float4 *)w)[u], b = ((const float4 *)x)[u];
		acc = __fmaf_rn(a.x, b.x, acc);
		acc = __fmaf_rn(a.y, b.y, acc);
		acc = __fmaf_rn(a.z, b.z, acc);
		acc = __fmaf_rn(a.w, b.w, acc);
		return acc;
	}
};

// unit8 folds 8 pairs of 16-bit floats (16 bytes each) in order: acc = fma(w_j, x_j, acc) (dot16).
template <float (*DEC)(uint16_t)>
FMT_FN float unit8(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
	uint4 a = ((const uint4 *)w)[u], b = ((const uint4 *)x)[u];
	uint32_t wa[4] = {a.x, a.y, a.z, a.w}, xb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
	for (int k = 0; k < 4; k++) {
		acc = __fmaf_rn(DEC((uint16_t)wa[k]), DEC((uint16_t)xb[k]), acc);
		acc = __fmaf_rn(DEC((uint16_t)(wa[k] >> 16)), DEC((uint16_t)(xb[k] >> 16)), acc);
	}
	return acc;
}

// F16 (f16.go): unit 8 values, f16 activations; acc = fma(w_j, x_j, acc) (products exact).
struct FmtF16 {
	static const int UNIT = 8;
	FMT_FN int64_t row_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return f16_to_f32(((const uint16_t *)w)[i]); }
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		return unit8<f16_to_f32>(acc, w, x, u);
	}
};

// BF16 (bf16.go): unit 8 values, bf16 activations; acc = fma(w_j, x_j, acc) (products exact).
struct FmtBF16 {
	static const int UNIT = 8;
	FMT_FN int64_t row_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return bf16_to_f32(((const uint16_t *)w)[i]); }
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		return unit8<bf16_to_f32>(acc, w, x, u);
	}
};

// Q8_0 (q8_0.go), q8_0 activations, unit one 34-byte block:
// S = Σ q_j·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ8_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 34 * (int64_t)(i / 32);
		return __fmul_rn(__int2float_rn(i8_at(b + 2 + i % 32)), f16_at(b));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		const uint8_t *b = w + 34 * (int64_t)u, *a = x + 34 * (int64_t)u;
		int32_t s = 0;
#pragma unroll
		for (int j = 0; j < 32; j++) s += i8_at(b + 2 + j) * i8_at(a + 2 + j);
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(f16_at(b), f16_at(a)), acc);
	}
};

// Q4_0 (q4_0.go), q8_0 activations, unit one 18-byte block:
// S = Σ (q_j − 8)·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ4_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 18; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 18 * (int64_t)(i / 32);
		int j = i % 32;
		int32_t q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
		return __fmul_rn(__int2float_rn(q - 8), f16_at(b));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		const uint8_t *b = w + 18 * (int64_t)u, *a = x + 34 * (int64_t)u;
		int32_t s = 0;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int32_t q = b[2 + j];
			s += ((q & 15) - 8) * i8_at(a + 2 + j) + ((q >> 4) - 8) * i8_at(a + 18 + j);
		}
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(f16_at(b), f16_at(a)), acc);
	}
};

// Q4_1 (q4_1.go), q8_1 activations, unit one 20-byte block: S = Σ q_j·a_j (exact);
// t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct FmtQ4_1 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 20; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 36; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 20 * (int64_t)(i / 32);
		int j = i % 32;
		int32_t q = j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4;
		return __fadd_rn(__fmul_rn(__int2float_rn(q), f16_at(b)), f16_at(b + 2));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		const uint8_t *b = w + 20 * (int64_t)u, *a = x + 36 * (int64_t)u;
		int32_t s = 0;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int32_t q = b[4 + j];
			s += (q & 15) * i8_at(a + 4 + j) + (q >> 4) * i8_at(a + 20 + j);
		}
		float t = __fmaf_rn(__int2float_rn(s), __fmul_rn(f16_at(b), f16_at(a)),
		                    __fmul_rn(f16_at(b + 2), f16_at(a + 2)));
		return __fadd_rn(acc, t);
	}
};

// Q5_0 (q5_0.go), q8_0 activations, unit one 22-byte block (qh at [2:6], 2-byte aligned):
// S = Σ (q_j − 16)·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ5_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 22; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 22 * (int64_t)(i / 32);
		int j = i % 32;
		uint32_t qh = (uint32_t) * (const uint16_t *)(b + 2) | (uint32_t) * (const uint16_t *)(b + 4) << 16;
		int32_t q = (j < 16 ? b[6 + j] & 15 : b[6 + j - 16] >> 4) | (int32_t)((qh >> j) & 1) << 4;
		return __fmul_rn(__int2float_rn(q - 16), f16_at(b));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		const uint8_t *b = w + 22 * (int64_t)u, *a = x + 34 * (int64_t)u;
		uint32_t qh = (uint32_t) * (const uint16_t *)(b + 2) | (uint32_t) * (const uint16_t *)(b + 4) << 16;
		int32_t s = 0;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int32_t q = b[6 + j];
			int32_t q0 = (q & 15) | (int32_t)((qh >> j) & 1) << 4;
			int32_t q1 = (q >> 4) | (int32_t)((qh >> (j + 16)) & 1) << 4;
			s += (q0 - 16) * i8_at(a + 2 + j) + (q1 - 16) * i8_at(a + 18 + j);
		}
		return __fmaf_rn(__int2float_rn(s), __fmul_rn(f16_at(b), f16_at(a)), acc);
	}
};

// Q5_1 (q5_1.go), q8_1 activations, unit one 24-byte block: S = Σ q_j·a_j (exact);
// t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct FmtQ5_1 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 24; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 36; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 24 * (int64_t)(i / 32);
		int j = i % 32;
		uint32_t qh = *(const uint32_t *)(b + 4);
		int32_t q = (j < 16 ? b[8 + j] & 15 : b[8 + j - 16] >> 4) | (int32_t)((qh >> j) & 1) << 4;
		return __fadd_rn(__fmul_rn(__int2float_rn(q), f16_at(b)), f16_at(b + 2));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		const uint8_t *b = w + 24 * (int64_t)u, *a = x + 36 * (int64_t)u;
		uint32_t qh = *(const uint32_t *)(b + 4);
		int32_t s = 0;
#pragma unroll
		for (int j = 0; j < 16; j++) {
			int32_t q = b[8 + j];
			int32_t q0 = (q & 15) | (int32_t)((qh >> j) & 1) << 4;
			int32_t q1 = (q >> 4) | (int32_t)((qh >> (j + 16)) & 1) << 4;
			s += q0 * i8_at(a + 4 + j) + q1 * i8_at(a + 20 + j);
		}
		float t = __fmaf_rn(__int2float_rn(s), __fmul_rn(f16_at(b), f16_at(a)),
		                    __fmul_rn(f16_at(b + 2), f16_at(a + 2)));
		return __fadd_rn(acc, t);
	}
};

// The K-quants: unit u is sub-block s = u mod 8 of super-block i = u / 8, with the q8_K block
// y = x_row + 292·i; D = float32(d·d_x) and Dmin = float32(dmin·d_x) are recomputed by every
// lane (the same bits each time).

// Q2_K (q2_k.go), 84-byte super-blocks: S = sc_2s·Σ_{l<16} q_l·a_l + sc_2s+1·Σ_{l≥16} q_l·a_l,
// M = m_2s·bsums[2s] + m_2s+1·bsums[2s+1] (exact); acc = fma(D, S, acc); acc = fma(−Dmin, M, acc).
struct FmtQ2_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 84; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 84 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc = b[2 * s + l / 16];
		float dl = __fmul_rn(f16_at(b + 80), __int2float_rn(sc & 0xf));
		float ml = __fmul_rn(f16_at(b + 82), __int2float_rn(sc >> 4));
		int32_t q = (b[16 + 32 * (s / 4) + l] >> (2 * (s % 4))) & 3;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		int32_t i = u >> 3;
		int s = u & 7;
		const uint8_t *b = w + 84 * (int64_t)i, *y = x + Q8K_BYTES * (int64_t)i;
		float dy = q8k_d(y);
		float d = __fmul_rn(f16_at(b + 80), dy), dmin = __fmul_rn(f16_at(b + 82), dy);
		const uint8_t *qs = b + 16 + 32 * (s / 4), *a = q8k_qs(y, s);
		int shift = 2 * (s % 4);
		int32_t s0 = 0, s1 = 0;
#pragma unroll
		for (int l = 0; l < 16; l++) {
			s0 += ((qs[l] >> shift) & 3) * i8_at(a + l);
			s1 += ((qs[16 + l] >> shift) & 3) * i8_at(a + 16 + l);
		}
		int32_t sc0 = b[2 * s], sc1 = b[2 * s + 1];
		int32_t sum = (sc0 & 0xf) * s0 + (sc1 & 0xf) * s1;
		int32_t msum = (sc0 >> 4) * q8k_sum(y, 2 * s) + (sc1 >> 4) * q8k_sum(y, 2 * s + 1);
		float t = __fmaf_rn(d, __int2float_rn(sum), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
};

// q3k_scale mirrors kernels' q3KScale: the 6-bit scale of group g, less 32.
FMT_FN int32_t q3k_scale(const uint8_t *sc, int g) {
	int32_t lo = (sc[g % 8] >> (4 * (g / 8))) & 0xf;
	int32_t hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
	return (lo | hi << 4) - 32;
}

// Q3_K (q3_k.go), 110-byte super-blocks: with u_l = r_l | hbit_l<<2 (q = u − 4),
// S = scale_2s·(Σ_{l<16} u_l·a_l − 4·bsums[2s]) + scale_2s+1·(Σ_{l≥16} u_l·a_l − 4·bsums[2s+1])
// (exact); acc = fma(D, S, acc).
struct FmtQ3_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 110; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 110 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		float dl = __fmul_rn(f16_at(b + 108), __int2float_rn(q3k_scale(b + 96, 2 * s + l / 16)));
		int32_t q = ((b[32 + 32 * (s / 4) + l] >> (2 * (s % 4))) & 3) - 4 + 4 * ((b[l] >> s) & 1);
		return __fmul_rn(dl, __int2float_rn(q));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		int32_t i = u >> 3;
		int s = u & 7;
		const uint8_t *b = w + 110 * (int64_t)i, *y = x + Q8K_BYTES * (int64_t)i;
		float d = __fmul_rn(f16_at(b + 108), q8k_d(y));
		const uint8_t *hm = b, *qs = b + 32 + 32 * (s / 4), *a = q8k_qs(y, s);
		int shift = 2 * (s % 4);
		int32_t s0 = 0, s1 = 0;
#pragma unroll
		for (int l = 0; l < 16; l++) {
			s0 += (((qs[l] >> shift) & 3) | ((hm[l] >> s) & 1) << 2) * i8_at(a + l);
			s1 += (((qs[16 + l] >> shift) & 3) | ((hm[16 + l] >> s) & 1) << 2) * i8_at(a + 16 + l);
		}
		s0 -= 4 * q8k_sum(y, 2 * s);
		s1 -= 4 * q8k_sum(y, 2 * s + 1);
		int32_t sum = q3k_scale(b + 96, 2 * s) * s0 + q3k_scale(b + 96, 2 * s + 1) * s1;
		return __fmaf_rn(d, __int2float_rn(sum), acc);
	}
};

// Q4_K (q4_k.go), 144-byte super-blocks: S = sc_s·Σ_l q_l·a_l, M = m_s·(bsums[2s] + bsums[2s+1])
// (exact); acc = fma(D, S, acc); acc = fma(−Dmin, M, acc).
struct FmtQ4_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 144; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 144 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		float dl = __fmul_rn(f16_at(b), __int2float_rn(sc)), ml = __fmul_rn(f16_at(b + 2), __int2float_rn(m));
		int32_t q = (b[16 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		int32_t i = u >> 3;
		int s = u & 7;
		const uint8_t *b = w + 144 * (int64_t)i, *y = x + Q8K_BYTES * (int64_t)i;
		float dy = q8k_d(y);
		float d = __fmul_rn(f16_at(b), dy), dmin = __fmul_rn(f16_at(b + 2), dy);
		const uint8_t *qs = b + 16 + 32 * (s / 2), *a = q8k_qs(y, s);
		int shift = 4 * (s % 2);
		int32_t sum = 0;
#pragma unroll
		for (int l = 0; l < 32; l++) sum += ((qs[l] >> shift) & 0xf) * i8_at(a + l);
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		int32_t msum = m * (q8k_sum(y, 2 * s) + q8k_sum(y, 2 * s + 1));
		float t = __fmaf_rn(d, __int2float_rn(sc * sum), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
};

// Q5_K (q5_k.go), 176-byte super-blocks: q_l = low bits | qh bit s << 4;
// S = sc_s·Σ_l q_l·a_l, M = m_s·(bsums[2s] + bsums[2s+1]) (exact); acc = fma(D, S, acc);
// acc = fma(−Dmin, M, acc).
struct FmtQ5_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 176; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 176 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		float dl = __fmul_rn(f16_at(b), __int2float_rn(sc)), ml = __fmul_rn(f16_at(b + 2), __int2float_rn(m));
		int32_t q = ((b[48 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf) | ((b[16 + l] >> s) & 1) << 4;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		int32_t i = u >> 3;
		int s = u & 7;
		const uint8_t *b = w + 176 * (int64_t)i, *y = x + Q8K_BYTES * (int64_t)i;
		float dy = q8k_d(y);
		float d = __fmul_rn(f16_at(b), dy), dmin = __fmul_rn(f16_at(b + 2), dy);
		const uint8_t *qh = b + 16, *qs = b + 48 + 32 * (s / 2), *a = q8k_qs(y, s);
		int shift = 4 * (s % 2);
		int32_t sum = 0;
#pragma unroll
		for (int l = 0; l < 32; l++) sum += (((qs[l] >> shift) & 0xf) | ((qh[l] >> s) & 1) << 4) * i8_at(a + l);
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		int32_t msum = m * (q8k_sum(y, 2 * s) + q8k_sum(y, 2 * s + 1));
		float t = __fmaf_rn(d, __int2float_rn(sc * sum), acc);
		return __fmaf_rn(-dmin, __int2float_rn(msum), t);
	}
};

// Q6_K (q6_k.go), 210-byte super-blocks: S = sc_2s·(Σ_{l<16} q_l·a_l − 32·bsums[2s])
// + sc_2s+1·(Σ_{l≥16} q_l·a_l − 32·bsums[2s+1]) (exact, sc signed); acc = fma(D, S, acc).
struct FmtQ6_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 210; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 210 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32, h = s / 4, k = s % 4;
		float dl = __fmul_rn(f16_at(b + 208), __int2float_rn(i8_at(b + 192 + 2 * s + l / 16)));
		int32_t q = (((b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xf) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4) - 32;
		return __fmul_rn(dl, __int2float_rn(q));
	}
	FMT_FN float step(float acc, const uint8_t *w, const uint8_t *x, int32_t u) {
		int32_t i = u >> 3;
		int s = u & 7;
		const uint8_t *b = w + 210 * (int64_t)i, *y = x + Q8K_BYTES * (int64_t)i;
		float d = __fmul_rn(f16_at(b + 208), q8k_d(y));
		int h = s / 4, k = s % 4;
		const uint8_t *ql = b + 64 * h + 32 * (k % 2), *qh = b + 128 + 32 * h, *a = q8k_qs(y, s);
		int sl = 4 * (k / 2), sh = 2 * k;
		int32_t s0 = 0, s1 = 0;
#pragma unroll
		for (int l = 0; l < 16; l++) {
			s0 += (((ql[l] >> sl) & 0xf) | ((qh[l] >> sh) & 3) << 4) * i8_at(a + l);
			s1 += (((ql[16 + l] >> sl) & 0xf) | ((qh[16 + l] >> sh) & 3) << 4) * i8_at(a + 16 + l);
		}
		s0 -= 32 * q8k_sum(y, 2 * s);
		s1 -= 32 * q8k_sum(y, 2 * s + 1);
		int32_t sum = i8_at(b + 192 + 2 * s) * s0 + i8_at(b + 193 + 2 * s) * s1;
		return __fmaf_rn(d, __int2float_rn(sum), acc);
	}
};
