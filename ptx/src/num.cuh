// num.cuh: the device side of verity/device/num, the arithmetic contract every bit-exact kernel
// follows. Each function here mirrors the Go function named in its comment, operation for
// operation: every float32 step is an explicitly rounded intrinsic (__fadd_rn, __fsub_rn,
// __fmul_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn), so neither the compiler nor ptxas may contract,
// reorder or approximate it, and the constants are the Go code's float32 bit patterns. Integer
// and bit manipulations are exact and are written to match the Go code's values (Go's uint32
// wraps, its int32 >> is arithmetic; so are CUDA's on these types).
//
// NaN: the GPU's float32 arithmetic returns only the canonical NaN 0x7fffffff (num.NaNBits);
// the routines that return a NaN explicitly return that one too.
#pragma once

#include <stdint.h>

#define NUM_FN static __device__ __forceinline__

// --- bits and basic operations (num/fma.go) ---

NUM_FN float f32_from_bits(uint32_t b) { return __uint_as_float(b); }
NUM_FN uint32_t f32_bits(float f) { return __float_as_uint(f); }

// nan32 mirrors num.NaN32.
NUM_FN float nan32() { return __uint_as_float(0x7fffffffu); }
NUM_FN float inf32() { return __uint_as_float(0x7f800000u); }

NUM_FN bool is_nan32(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }

// fma32 mirrors num.FMA32: a*b + c rounded once.
NUM_FN float fma32(float a, float b, float c) { return __fmaf_rn(a, b, c); }

// muladd32 mirrors num.MulAdd32: float32(a*b) + c, two roundings.
NUM_FN float muladd32(float a, float b, float c) { return __fadd_rn(__fmul_rn(a, b), c); }

// sqrt32 mirrors num.Sqrt32: NaN and negative inputs give the canonical NaN.
NUM_FN float sqrt32(float x) {
	if (is_nan32(x) || x < 0.0f) return nan32();
	return __fsqrt_rn(x);
}

// rsqrt32 mirrors num.Rsqrt32: 1 / sqrt32(x), two correctly rounded steps.
NUM_FN float rsqrt32(float x) {
	float s = sqrt32(x);
	if (is_nan32(s)) return s;
	return __fdiv_rn(1.0f, s);
}

// max32 mirrors num.Max32 (PTX max.f32 rules, spelled out): one NaN gives the other input, two
// give the canonical NaN, +0 > -0.
NUM_FN float max32(float a, float b) {
	bool an = is_nan32(a), bn = is_nan32(b);
	if (an && bn) return nan32();
	if (an) return b;
	if (bn) return a;
	if (a > b) return a;
	if (b > a) return b;
	if (__float_as_uint(a) >> 31) return b;
	return a;
}

// min32 mirrors num.Min32: one NaN gives the other input, two give the canonical NaN, -0 < +0.
NUM_FN float min32(float a, float b) {
	bool an = is_nan32(a), bn = is_nan32(b);
	if (an && bn) return nan32();
	if (an) return b;
	if (bn) return a;
	if (a < b) return a;
	if (b < a) return b;
	if (__float_as_uint(a) >> 31) return a;
	return b;
}

// --- half precision (num/half.go) ---

// f16_to_f32 mirrors num.F16ToF32: exact; NaN payloads are kept. On the device the widening is
// the hardware's (cvt.f32.f16, exact) with a NaN's bits rebuilt (a conversion may not keep its
// payload); on the host the same bits without branches, every case computed and one selected.
NUM_FN float f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31;
	uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
	uint32_t man = (uint32_t)h & 0x3ffu;
	uint32_t special = sign | 0x7f800000u | man << 13; // infinite or NaN: the mantissa kept
#ifdef __CUDA_ARCH__
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return exp == 0x1fu ? __uint_as_float(special) : f;
#else
	uint32_t normal = sign | (exp + 112u) << 23 | man << 13;
	// subnormal or zero: ±man · 2^-24, exact (man < 2^10)
	uint32_t sub = sign | __float_as_uint(__fmul_rn(__uint2float_rn(man), 0x1p-24f));
	return __uint_as_float(exp == 0x1fu ? special : exp == 0 ? sub : normal);
#endif
}

// f32_to_f16 mirrors num.F32ToF16: round to nearest even, overflow to ±Inf, gradual underflow,
// NaN to the quiet NaN 0x7e00 with the sign kept.
NUM_FN uint16_t f32_to_f16(float f) {
	uint32_t b = __float_as_uint(f);
	uint16_t sign = (uint16_t)(b >> 16) & 0x8000u;
	uint32_t abs = b & 0x7fffffffu;
	if (abs > 0x7f800000u) return sign | 0x7e00u;
	if (abs >= 0x477ff000u) return sign | 0x7c00u;
	if (abs >= 0x38800000u) {
		uint32_t v = abs - (112u << 23);
		uint32_t round = 0xfffu + ((v >> 13) & 1u);
		return sign | (uint16_t)((v + round) >> 13);
	}
	if (abs < 0x33000000u) return sign;
	uint32_t exp = abs >> 23;
	uint32_t man = (abs & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126u - exp;
	uint32_t half = 1u << (shift - 1);
	uint32_t q = man >> shift;
	uint32_t rem = man & ((1u << shift) - 1u);
	if (rem > half || (rem == half && (q & 1u) == 1u)) q++;
	return sign | (uint16_t)q;
}

// bf16_to_f32 mirrors num.BF16ToF32 (exact).
NUM_FN float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// f32_to_bf16 mirrors num.F32ToBF16: round to nearest even; NaN quieted (bit 6 set).
NUM_FN uint16_t f32_to_bf16(float f) {
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16) | 64u;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// --- exp, sigmoid, silu (num/exp.go) ---

#define NUM_EXP_LOG2E 0x3fb8aa3bu
#define NUM_EXP_SHIFT 0x4b400000u
#define NUM_EXP_LN2HI 0x3f317218u
#define NUM_EXP_LN2LO 0xb102e308u
#define NUM_EXP_C2 0x3f000000u
#define NUM_EXP_C3 0x3e2aaaaau
#define NUM_EXP_C4 0x3d2aaa74u
#define NUM_EXP_C5 0x3c088987u
#define NUM_EXP_C6 0x3ab6a65eu
#define NUM_EXP_C7 0x394efdd4u

// exp_core mirrors num's expCore: exp(x) = (hi + lo)·2^j for |x| ≤ 128, step for step.
NUM_FN void exp_core(float x, float *hi, float *lo, int32_t *j) {
	float shift = f32_from_bits(NUM_EXP_SHIFT);
	float t = __fmaf_rn(x, f32_from_bits(NUM_EXP_LOG2E), shift);
	float jf = __fsub_rn(t, shift);
	*j = __float2int_rz(jf);
	float rh = __fmaf_rn(-jf, f32_from_bits(NUM_EXP_LN2HI), x);
	float fh = __fmaf_rn(-jf, f32_from_bits(NUM_EXP_LN2LO), rh);
	float fl = __fmaf_rn(-jf, f32_from_bits(NUM_EXP_LN2LO), __fsub_rn(rh, fh));
	float s = __fmul_rn(fh, fh);
	float sl = __fmaf_rn(fh, fh, -s);
	float p = __fmaf_rn(f32_from_bits(NUM_EXP_C7), fh, f32_from_bits(NUM_EXP_C6));
	p = __fmaf_rn(p, fh, f32_from_bits(NUM_EXP_C5));
	p = __fmaf_rn(p, fh, f32_from_bits(NUM_EXP_C4));
	p = __fmaf_rn(p, fh, f32_from_bits(NUM_EXP_C3));
	p = __fmaf_rn(p, fh, f32_from_bits(NUM_EXP_C2));
	float tl = __fmaf_rn(s, p, __fmaf_rn(sl, 0.5f, __fmaf_rn(fl, fh, fl)));
	float u = __fadd_rn(1.0f, fh);
	float e = __fsub_rn(fh, __fsub_rn(u, 1.0f));
	float v = __fadd_rn(e, tl);
	*hi = __fadd_rn(u, v);
	*lo = __fadd_rn(__fsub_rn(u, *hi), v);
}

// pow2 mirrors num's pow2: 2^k for -126 ≤ k ≤ 127 from exponent bits.
NUM_FN float pow2(int32_t k) { return __uint_as_float((uint32_t)(k + 127) << 23); }

// scale mirrors num's scale: q·2^j as (q·2^(j>>1))·2^(j-(j>>1)).
NUM_FN float scale(float q, int32_t j) {
	int32_t h = j >> 1;
	return __fmul_rn(__fmul_rn(q, pow2(h)), pow2(j - h));
}

// exp32 mirrors num.Exp32.
NUM_FN float exp32(float x) {
	if (is_nan32(x)) return nan32();
	if (x > 128.0f) return inf32();
	if (x < -128.0f) return 0.0f;
	float hi, lo;
	int32_t j;
	exp_core(x, &hi, &lo, &j);
	return scale(hi, j);
}

// exp_neg mirrors num's expNeg: e^a = (hi + lo)·2^j and 1/(1 + e^a) ≈ q + c.
NUM_FN void exp_neg(float a, float *hi, float *lo, int32_t *j, float *q, float *c) {
	exp_core(a, hi, lo, j);
	float eh = scale(*hi, *j), el = scale(*lo, *j);
	float d = __fadd_rn(1.0f, eh);
	float e = __fadd_rn(__fsub_rn(eh, __fsub_rn(d, 1.0f)), el);
	*q = __fdiv_rn(1.0f, d);
	*c = __fmul_rn(*q, __fmaf_rn(-*q, e, __fmaf_rn(-*q, d, 1.0f)));
}

// sigmoid32 mirrors num.Sigmoid32.
NUM_FN float sigmoid32(float x) {
	if (is_nan32(x)) return nan32();
	if (x > 128.0f) return 1.0f;
	if (x < -128.0f) return 0.0f;
	float a = x < 0.0f ? x : -x;
	float hi, lo, q, c;
	int32_t j;
	exp_neg(a, &hi, &lo, &j, &q, &c);
	if (x >= 0.0f) return __fadd_rn(q, c);
	return scale(__fmaf_rn(hi, q, __fmaf_rn(hi, c, __fmul_rn(lo, q))), j);
}

// silu32 mirrors num.SiLU32.
NUM_FN float silu32(float x) {
	if (is_nan32(x)) return nan32();
	if (x > 128.0f) return x;
	if (x < -128.0f) return -0.0f;
	float a = x < 0.0f ? x : -x;
	float hi, lo, q, c;
	int32_t j;
	exp_neg(a, &hi, &lo, &j, &q, &c);
	if (x >= 0.0f) return __fmaf_rn(x, q, __fmul_rn(x, c));
	float wh = __fmul_rn(hi, q);
	float wl = __fadd_rn(__fmaf_rn(hi, q, -wh), __fmaf_rn(hi, c, __fmul_rn(lo, q)));
	return scale(__fmaf_rn(x, wh, __fmul_rn(x, wl)), j);
}

// --- tanh, gelu (num/tanh.go) ---

#define NUM_TANH_T3 0xbeaaaaabu
#define NUM_TANH_T5 0x3e088889u
#define NUM_TANH_T7 0xbd5d0dd1u
#define NUM_TANH_T9 0x3cb327a4u
#define NUM_TANH_T11 0xbc11371bu
#define NUM_TANH_T13 0x3b6b69e8u
#define NUM_GELU_KHI 0x3fcc422au
#define NUM_GELU_KLO 0xb342bc9bu
#define NUM_GELU_CHI 0x3d922279u
#define NUM_GELU_CLO 0x3124d8b5u

// tanh32 mirrors num.Tanh32.
NUM_FN float tanh32(float x) {
	if (is_nan32(x)) return nan32();
	float a = fabsf(x);
	if (a < 0x1p-12f) return x;
	if (a < 0.25f) {
		float s = __fmul_rn(x, x);
		float p = __fmaf_rn(f32_from_bits(NUM_TANH_T13), s, f32_from_bits(NUM_TANH_T11));
		p = __fmaf_rn(p, s, f32_from_bits(NUM_TANH_T9));
		p = __fmaf_rn(p, s, f32_from_bits(NUM_TANH_T7));
		p = __fmaf_rn(p, s, f32_from_bits(NUM_TANH_T5));
		p = __fmaf_rn(p, s, f32_from_bits(NUM_TANH_T3));
		return __fmaf_rn(__fmul_rn(x, s), p, x);
	}
	if (a >= 10.0f) return x < 0.0f ? -1.0f : 1.0f;
	float hi, lo;
	int32_t j;
	exp_core(__fmul_rn(-2.0f, a), &hi, &lo, &j);
	float eh = scale(hi, j), el = scale(lo, j);
	float nh = __fsub_rn(1.0f, eh);
	float nl = __fsub_rn(__fsub_rn(-eh, __fsub_rn(nh, 1.0f)), el);
	float dh = __fadd_rn(1.0f, eh);
	float dl = __fadd_rn(__fsub_rn(eh, __fsub_rn(dh, 1.0f)), el);
	float q = __fdiv_rn(nh, dh);
	float y = __fadd_rn(q, __fdiv_rn(__fmaf_rn(-q, dl, __fadd_rn(__fmaf_rn(-q, dh, nh), nl)), dh));
	return x < 0.0f ? -y : y;
}

// gelu32 mirrors num.GELU32 (x·sigmoid(z), z = 2·sqrt(2/π)·(x + 0.044715·x³) as zh + zl).
NUM_FN float gelu32(float x) {
	if (is_nan32(x)) return nan32();
	if (x >= 10.0f) return x;
	if (x <= -12.0f) return -0.0f;
	float kh = f32_from_bits(NUM_GELU_KHI), ch = f32_from_bits(NUM_GELU_CHI);
	float x2 = __fmul_rn(x, x);
	float x3 = __fmul_rn(x2, x);
	float e3 = __fadd_rn(__fmaf_rn(x2, x, -x3), __fmul_rn(__fmaf_rn(x, x, -x2), x));
	float h1 = __fmul_rn(kh, x);
	float l1 = __fmaf_rn(kh, x, -h1);
	float h3 = __fmul_rn(ch, x3);
	float l3 = __fmaf_rn(ch, x3, -h3);
	float zh = __fadd_rn(h1, h3);
	float b = __fsub_rn(zh, h1);
	float t = __fadd_rn(__fsub_rn(h1, __fsub_rn(zh, b)), __fsub_rn(h3, b));
	float zl = __fadd_rn(t, __fadd_rn(__fadd_rn(l1, l3),
	                                  __fmaf_rn(f32_from_bits(NUM_GELU_KLO), x,
	                                            __fmaf_rn(ch, e3, __fmul_rn(f32_from_bits(NUM_GELU_CLO), x3)))));
	float hi, lo;
	int32_t j;
	if (x >= 0.0f) {
		exp_core(-zh, &hi, &lo, &j);
		lo = __fmaf_rn(-hi, zl, lo);
	} else {
		if (zh < -128.0f) return -0.0f;
		exp_core(zh, &hi, &lo, &j);
		lo = __fmaf_rn(hi, zl, lo);
	}
	float eh = scale(hi, j), el = scale(lo, j);
	float d = __fadd_rn(1.0f, eh);
	float e = __fadd_rn(__fsub_rn(eh, __fsub_rn(d, 1.0f)), el);
	float q = __fdiv_rn(1.0f, d);
	float c = __fmul_rn(q, __fmaf_rn(-q, e, __fmaf_rn(-q, d, 1.0f)));
	if (x >= 0.0f) return __fmaf_rn(x, q, __fmul_rn(x, c));
	float wh = __fmul_rn(hi, q);
	float wl = __fadd_rn(__fmaf_rn(hi, q, -wh), __fmaf_rn(hi, c, __fmul_rn(lo, q)));
	return scale(__fmaf_rn(x, wh, __fmul_rn(x, wl)), j);
}

// --- log, log1p, softplus (num/log.go) ---

#define NUM_LOG_TWO_THIRDS 0x3f2aaaabu
#define NUM_LOG_LN2HI 0x3f317200u
#define NUM_LOG_LN2LO 0x35bfbe8eu
#define NUM_LOG_2P23 0x4b000000u
#define NUM_LOG_THIRD 0x3eaaaaabu

// log1p's polynomial coefficients Q1 … Q9 (num's logQBits; Q0 = -1/2 is applied separately).
#define NUM_LOG_Q1 0x3eaaaaabu
#define NUM_LOG_Q2 0xbe7fff8bu
#define NUM_LOG_Q3 0x3e4ccbfau
#define NUM_LOG_Q4 0xbe2acbefu
#define NUM_LOG_Q5 0x3e127542u
#define NUM_LOG_Q6 0xbdf9d3f4u
#define NUM_LOG_Q7 0x3ddc9ad1u
#define NUM_LOG_Q8 0xbe0369e0u
#define NUM_LOG_Q9 0x3df4bba7u

// log_reduce mirrors num's logReduce: u = 2^e·m, m in [2/3, 4/3), for a positive normal u.
NUM_FN void log_reduce(float u, int32_t *e, float *m) {
	uint32_t b = __float_as_uint(u);
	*e = (int32_t)(b - NUM_LOG_TWO_THIRDS) >> 23;
	*m = __uint_as_float(b - ((uint32_t)*e << 23));
}

// log_core mirrors num's logCore.
NUM_FN float log_core(float i, float f, float c) {
	float sh = __fmul_rn(f, f);
	float sl = __fmaf_rn(f, f, -sh);
	float h = __fmul_rn(0.5f, sh);
	float r = f32_from_bits(NUM_LOG_Q9); // Horner from Q9 down to Q1
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q8));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q7));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q6));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q5));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q4));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q3));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q2));
	r = __fmaf_rn(r, f, f32_from_bits(NUM_LOG_Q1));
	float hi = __fmul_rn(i, f32_from_bits(NUM_LOG_LN2HI));
	float sum = __fadd_rn(hi, f);
	float e = __fsub_rn(f, __fsub_rn(sum, hi));
	float sum2 = __fsub_rn(sum, h);
	float e2 = __fsub_rn(__fsub_rn(sum, sum2), h);
	float lo = __fmaf_rn(i, f32_from_bits(NUM_LOG_LN2LO), __fadd_rn(e, c));
	lo = __fmaf_rn(-0.5f, sl, __fadd_rn(lo, e2));
	lo = __fmaf_rn(__fmul_rn(f, sh), r, lo);
	return __fadd_rn(sum2, lo);
}

// log32 mirrors num.Log32.
NUM_FN float log32(float x) {
	if (is_nan32(x) || x < 0.0f) return nan32();
	if (x == 0.0f) return -inf32();
	if (x == inf32()) return x;
	int32_t bias = 0;
	if (x < 0x1p-126f) {
		x = __fmul_rn(x, f32_from_bits(NUM_LOG_2P23));
		bias = -23;
	}
	int32_t e;
	float m;
	log_reduce(x, &e, &m);
	return log_core(__int2float_rn(e + bias), __fsub_rn(m, 1.0f), 0.0f);
}

// log1p_pair mirrors num's log1pPair: log(1 + xh + xl).
NUM_FN float log1p_pair(float xh, float xl) {
	float third = f32_from_bits(NUM_LOG_THIRD);
	if (xh <= third && xh >= -third) return log_core(0.0f, xh, __fdiv_rn(xl, __fadd_rn(1.0f, xh)));
	float u = __fadd_rn(1.0f, xh);
	float z = __fsub_rn(u, 1.0f);
	float c = __fadd_rn(__fsub_rn(1.0f, __fsub_rn(u, z)), __fsub_rn(xh, z));
	c = __fadd_rn(c, xl);
	int32_t e;
	float m;
	log_reduce(u, &e, &m);
	float d = __fdiv_rn(scale(c, -e), m);
	return log_core(__int2float_rn(e), __fsub_rn(m, 1.0f), d);
}

// log1p32 mirrors num.Log1p32.
NUM_FN float log1p32(float x) {
	if (is_nan32(x) || x < -1.0f) return nan32();
	if (x == -1.0f) return -inf32();
	if (x == inf32()) return x;
	if (x == 0.0f) return x;
	return log1p_pair(x, 0.0f);
}

// softplus32 mirrors num.Softplus32 (x itself above ggml's cutoff 20).
NUM_FN float softplus32(float x) {
	if (is_nan32(x)) return nan32();
	if (x > 20.0f) return x;
	if (x < -128.0f) return 0.0f;
	float hi, lo;
	int32_t j;
	exp_core(x, &hi, &lo, &j);
	if (x < -17.0f) { // num's softplusTiny: log1p(e) ≈ e − e²/2, with e = hi + lo scaled
		float t = scale(__fmul_rn(__fmul_rn(0.5f, hi), hi), j);
		return scale(__fadd_rn(hi, __fsub_rn(lo, t)), j);
	}
	return log1p_pair(scale(hi, j), scale(lo, j));
}

// --- warp reductions (num/warp.go) ---

#define NUM_FULL_MASK 0xffffffffu

// warp_sum mirrors num.WarpSum: xor butterfly with offsets 16, 8, 4, 2, 1; lane l adds its
// value and lane l^off's. Every lane returns the total. All 32 lanes must call it.
NUM_FN float warp_sum(float v) {
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(NUM_FULL_MASK, v, off));
	return v;
}

// warp_sums_step is warp_sums' step at offset OFF over the M values v[0 … M) a lane holds:
// with M > 1 it keeps M/2 of them, with M = 1 it is warp_sum's step.
template <int M, int OFF> NUM_FN void warp_sums_step(float *v, int lane) {
	if (M == 1) {
		v[0] = __fadd_rn(v[0], __shfl_xor_sync(NUM_FULL_MASK, v[0], OFF));
		return;
	}
	const bool up = (lane & OFF) != 0;
#pragma unroll
	for (int k = 0; k < M / 2; k++) {
		float keep = up ? v[k + M / 2] : v[k];
		float send = up ? v[k] : v[k + M / 2];
		v[k] = __fadd_rn(keep, __shfl_xor_sync(NUM_FULL_MASK, send, OFF));
	}
}

// warp_sums takes the warp totals of N values a lane (N a power of two ≤ 32) with warp_sum's
// bits, in N − 1 + (5 − log2 N) shuffles instead of 5N: the same butterfly, offsets 16, 8, 4,
// 2, 1, but while a lane holds m > 1 values, the step at offset o keeps half of them — the upper half where
// bit o of the lane is set — and sends its partner the other half. Each kept value is then the
// sum warp_sum forms at that step for that index, in one of the two lanes that form it (a + b
// and b + a are the same bits: the sums' NaNs are canonical). The total of value
// lane / (32 / N) is returned: every value's total ends in 32 / N lanes, the first of which
// is lane 32 / N · index. All 32 lanes must call it; v is overwritten.
template <int N> NUM_FN float warp_sums(float (&v)[N], int lane) {
	static_assert(N >= 2 && N <= 32 && (N & (N - 1)) == 0, "N is a power of two, 2 … 32");
	warp_sums_step<N, 16>(v, lane);
	warp_sums_step<(N >= 4 ? N / 2 : 1), 8>(v, lane);
	warp_sums_step<(N >= 8 ? N / 4 : 1), 4>(v, lane);
	warp_sums_step<(N >= 16 ? N / 8 : 1), 2>(v, lane);
	warp_sums_step<(N >= 32 ? N / 16 : 1), 1>(v, lane);
	return v[0];
}

// max_key maps a float to an int32 whose integer order is max32's: a non-negative float keeps
// its bits, a negative one has its magnitude bits flipped (so −0 is −1, below +0's 0, and −∞ is
// 0x807fffff), and every NaN is INT32_MIN, below all of them. max32 of any values is then
// max_unkey of the integer maximum of their keys, in any grouping: a NaN gives way to any
// number, and only values that are all NaNs give INT32_MIN, which max_unkey turns into the
// canonical NaN, as max32 does. One integer maximum (IMNMX, or a whole warp's in one
// redux.sync) in place of max32's tests.
NUM_FN int32_t max_key(float x) {
	const int32_t b = __float_as_int(x);
	return is_nan32(x) ? INT32_MIN : b ^ ((b >> 31) & 0x7fffffff);
}
NUM_FN float max_unkey(int32_t k) { return k == INT32_MIN ? nan32() : __int_as_float(k ^ ((k >> 31) & 0x7fffffff)); }

// warp_max_key is the integer maximum of k over the warp, in every lane: one redux.sync on
// sm_80 and later, else the xor butterfly. All 32 lanes must call it.
NUM_FN int32_t warp_max_key(int32_t k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	return __reduce_max_sync(NUM_FULL_MASK, k);
#else
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(NUM_FULL_MASK, k, off));
	return k;
#endif
}

// warp_max has num.WarpMax's result (its butterfly with max32): max32 is a total order's
// maximum, so the warp's maximum of the keys (warp_max_key) is the same value.
NUM_FN float warp_max(float v) { return max_unkey(warp_max_key(max_key(v))); }

// warp_arg_best folds (value, index) pairs over the warp with the xor butterfly, keeping the
// pair for which better(candidate, its index, kept, its index) holds; every lane ends with the
// warp's best pair when better is a strict total order on the pairs (argmax, the q8_K scale's
// largest magnitude). All 32 lanes must call it.
template <bool (*better)(float, int32_t, float, int32_t)>
NUM_FN void warp_arg_best(float &v, int32_t &i) {
	for (int off = 16; off > 0; off >>= 1) {
		float ov = __shfl_xor_sync(NUM_FULL_MASK, v, off);
		int32_t oi = __shfl_xor_sync(NUM_FULL_MASK, i, off);
		if (better(ov, oi, v, i)) {
			v = ov;
			i = oi;
		}
	}
}

// warp_sum_i32 adds an int32 over the warp (exact: any order gives the same bits).
NUM_FN int32_t warp_sum_i32(int32_t v) {
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(NUM_FULL_MASK, v, off);
	return v;
}
