// cache.cuh: the K/V cache's element types (kernels.CacheTypes, as dtype values) and their
// exact conversions, shared by attention.cu and rope.cu.
#pragma once

#include "num.cuh"

#define CACHE_F16 1
#define CACHE_BF16 30

// cache_store rounds v to cache type t and stores it as element i of c.
static __device__ __forceinline__ void cache_store(void *c, int32_t t, int64_t i, float v) {
	if (t == CACHE_F16)
		((uint16_t *)c)[i] = f32_to_f16(v);
	else if (t == CACHE_BF16)
		((uint16_t *)c)[i] = f32_to_bf16(v);
	else
		((uint32_t *)c)[i] = __float_as_uint(v);
}

// cache_load widens element i of cache c (type t) to float32.
static __device__ __forceinline__ float cache_load(const void *c, int32_t t, int64_t i) {
	if (t == CACHE_F16) return f16_to_f32(((const uint16_t *)c)[i]);
	if (t == CACHE_BF16) return bf16_to_f32(((const uint16_t *)c)[i]);
	return ((const float *)c)[i];
}

// cache_bytes is the size of one element of cache type t.
static __device__ __forceinline__ int32_t cache_bytes(int32_t t) { return t == CACHE_F16 || t == CACHE_BF16 ? 2 : 4; }
