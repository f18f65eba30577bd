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
};

#define HW_GRID (Grid{blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, threadIdx.x, blockDim.x, 0})

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
// hardware grid. The megakernel's translation unit defines MEGAKERNEL and gets the bodies only.
#ifdef MEGAKERNEL
#define ENTRY(name, params, ...)
#else
#define ENTRY(name, params, ...) \
	extern "C" __global__ void name params { name##_body(HW_GRID, __VA_ARGS__); }
#endif
