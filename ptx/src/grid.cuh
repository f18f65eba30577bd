// grid.cuh: where a kernel body runs. Every kernel is a body — a __device__ function whose
// first parameter is a Grid — and an extern "C" __global__ entry (ENTRY) that calls it with the
// hardware's indices. The megakernel (megakernel.cu) calls the same bodies for the blocks of an
// instruction's part, with virtual indices: several virtual blocks to a thread block when they
// are small, each in its own group of warps. A body therefore reads its block and thread
// indices only from its Grid, and synchronises its block only with grid_sync. Bodies are not
// static: a static function's local __shared__ variables get names that hash the source
// file's path, which would make the PTX depend on where the repository is checked out.
#pragma once

#include <stdint.h>

struct Grid {
	uint32_t bx, by;   // block index (blockIdx.x, .y)
	uint32_t nbx, nby; // grid size (gridDim.x, .y)
	uint32_t tid;      // thread index in the block (threadIdx.x)
	uint32_t ntid;     // threads per block (blockDim.x)
	uint32_t bar;      // the block's barrier: 0 is the thread block's own, 1… a named barrier of ntid threads
	void *shared;      // the block's shared memory (see "Shared memory" below); null for bodies without
	// The megakernel's staged stream (megakernel.cu): global bytes [stage, stage + staged) of
	// the part's weights have a copy at the start of shared, which grid_stage reads in their
	// place. Zero outside the megakernel.
	uint64_t stage;
	uint32_t staged;
};

#define HW_GRID (Grid{blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, threadIdx.x, blockDim.x, 0, nullptr, 0, 0})

// l2_prefetch asks the L2 for the line holding p: a hint, which changes no value (host builds
// have none).
static __device__ __forceinline__ void l2_prefetch(const void *p) {
#ifdef __CUDA_ARCH__
	asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// grid_stage returns where to read the n bytes at p, weights that no kernel of the step
// writes: their copy in shared memory when the megakernel staged all of them, else p itself.
// The copy holds the same bytes, so the loads through the pointer return the same values; the
// loads are generic, which reach either space.
static __device__ __forceinline__ const uint8_t *grid_stage(const Grid &g, const uint8_t *p, int64_t n) {
#ifdef MEGAKERNEL
	uint64_t o = (uint64_t)p - g.stage; // wraps past the copy's end when p lies before it
	if (o < g.staged && (uint64_t)n <= g.staged - o) return (const uint8_t *)g.shared + o;
#endif
	return p;
}

// Shared memory. A body declares no __shared__ variable of its own. What its block shares is one
// struct of the body's (a plain struct of arrays and scalars, its size a constant of the source,
// never a function of the launch's arguments), which it reaches through grid_shared<T>(gr):
//   - in an eager launch, the entry's own copy of T, declared by ENTRY_SHARED (so the eager
//     kernel's static shared memory is exactly sizeof(T));
//   - in the megakernel, the start of the one dynamic shared-memory buffer that every body
//     shares (megakernel.cu), as large as the largest body's T: the bodies' shared memory is
//     the maximum of their structs, not their sum. tools/mkgen reads each entry's size from its
//     committed PTX and writes the maximum into the kernel table (MK_SHARED_BYTES) and the Go
//     constant megakernel.SharedBytes the launch asks for.
// The rules that make one buffer safe:
//   - a body that uses shared memory runs one virtual block per thread block (mkgen marks its
//     kernel exclusive because its PTX has .shared), and the megakernel meets at a barrier
//     between two virtual blocks, so one struct lives in the buffer at a time;
//   - the struct's contents are undefined when the body starts (neither zero nor what the last
//     virtual block left) and dead when it returns;
//   - the buffer is 16-byte aligned (vector accesses are fine);
//   - a helper that needs shared memory takes its own struct by reference; a body whose helpers
//     need some makes their structs members of its own (act.cu: RowActShared holds the
//     Q8KShared of q8k_convert_block).
// ptx_test.go checks the convention: the only shared variables in the committed PTX are the
// ENTRY_SHARED structs and the megakernel's buffer.
template <typename T> static __device__ __forceinline__ T &grid_shared(const Grid &g) { return *(T *)g.shared; }

// grid_sync is __syncthreads for the threads of the body's block. (Host builds of the sources,
// which run only whole thread blocks, have no named barriers.)
static __device__ __forceinline__ void grid_sync(const Grid &g) {
#ifdef __CUDA_ARCH__
	if (g.bar != 0) {
		asm volatile("bar.sync %0, %1;" ::"r"(g.bar), "r"(g.ntid) : "memory");
		return;
	}
#endif
	__syncthreads();
}

// RESTRICT marks a kernel's pointers as unaliased, which lets the compiler read inputs through
// the non-coherent read-only cache (ld.global.nc). Not in the megakernel: there an input may
// have been written by another SM during the same launch, and the read-only cache need not
// see that.
#ifdef MEGAKERNEL
#define RESTRICT
#else
#define RESTRICT __restrict__
#endif

// ENTRY(name, (params), args…) defines the kernel entry `name` that runs name_body on the
// hardware grid; ENTRY_SHARED(name, T, (params), args…) one whose body uses shared struct T
// (its static copy is named `shared`). The megakernel's translation unit defines MEGAKERNEL and
// gets the bodies only.
// ENTRY_BOUNDS(name, bounds, (params), args…) and ENTRY_SHARED_BOUNDS(name, T, bounds, (params),
// args…) are ENTRY and ENTRY_SHARED with the entry's __launch_bounds__(…) in bounds.
#ifdef MEGAKERNEL
#define ENTRY(name, params, ...)
#define ENTRY_SHARED(name, T, params, ...)
#define ENTRY_SHARED_BOUNDS(name, T, bounds, params, ...)
#define ENTRY_BOUNDS(name, bounds, params, ...)
#else
#define ENTRY_BOUNDS(name, bounds, params, ...) \
	extern "C" __global__ void bounds name params { name##_body(HW_GRID, __VA_ARGS__); }
#define ENTRY(name, params, ...) \
	extern "C" __global__ void name params { name##_body(HW_GRID, __VA_ARGS__); }
#define ENTRY_SHARED(name, T, params, ...) ENTRY_SHARED_BOUNDS(name, T, , params, __VA_ARGS__)
#define ENTRY_SHARED_BOUNDS(name, T, bounds, params, ...)                                           \
	extern "C" __global__ void bounds name params {                                                 \
		__shared__ __align__(16) unsigned char shared[sizeof(T)];                                   \
		name##_body(Grid{blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, threadIdx.x, blockDim.x, 0, shared, 0, 0}, \
		            __VA_ARGS__);                                                                   \
	}
#endif
