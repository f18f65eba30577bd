// hostshim.h lets the device code in ../src compile as host C++ (see host_test.go): each CUDA
// intrinsic the kernels use becomes the IEEE operation it stands for. Built with
// -ffp-contract=off on a CPU with IEEE float32 arithmetic (x86-64 SSE, arm64), a + b is
// __fadd_rn and std::fma is __fmaf_rn (correctly rounded). NaN payloads follow the CPU, not the
// GPU, so results are compared with every NaN taken as the same value. simt.h adds threads,
// thread and block indices, and the warp operations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct host_dim3 {
	unsigned x, y, z;
};
static host_dim3 blockDim, gridDim;

struct float4 {
	float x, y, z, w;
};
struct uint4 {
	uint32_t x, y, z, w;
};
struct uint2 {
	uint32_t x, y;
};
struct float2 {
	float x, y;
};
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint2 make_uint2(uint32_t x, uint32_t y) { return uint2{x, y}; }

static inline float __uint_as_float(uint32_t b) {
	float f;
	memcpy(&f, &b, 4);
	return f;
}
static inline uint32_t __float_as_uint(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}
static inline float __int_as_float(int32_t b) { return __uint_as_float((uint32_t)b); }
static inline int32_t __float_as_int(float f) { return (int32_t)__float_as_uint(f); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __int2float_rn(int32_t i) { return (float)i; }
static inline float __uint2float_rn(uint32_t u) { return (float)u; }
// shf.r.clamp.b32: the low word of (hi:lo) >> min(n, 32)
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t n) {
	uint64_t v = (uint64_t)hi << 32 | lo;
	return (uint32_t)(v >> (n < 32 ? n : 32));
}
// cvt.rzi.s32.f32: truncation, saturating, NaN to 0
static inline int32_t __float2int_rz(float f) {
	if (f != f) return 0;
	if (f >= 2147483648.0f) return INT32_MAX;
	if (f <= -2147483648.0f) return INT32_MIN;
	return (int32_t)f;
}
using std::max;
using std::min;
