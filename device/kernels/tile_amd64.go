//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"verity/device/dtype"
	"verity/repack"
)

// tileCPU: the CPU has what the tile forms (tile_amd64.s) use — AVX-512 F, BW and VL with
// VNNI — besides the vector forms' AVX2, FMA and F16C.
var tileCPU = vectorCPU && cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512VNNI)

// tileArgs is the tile forms' description of a tile (offsets read by tile_amd64.s).
type tileArgs struct {
	stride, plane, plane2, scale, f16b, blocks, xstride, ncols int64
	pf, pfn                                                    uintptr
}

//go:noescape
func q4KTile16(w, x *byte, a *tileArgs, acc, out *float32)

//go:noescape
func q5KTile16(w, x *byte, a *tileArgs, acc, out *float32)

//go:noescape
func q6KTile16(w, x *byte, a *tileArgs, acc, out *float32)

// vectorTile holds the tile forms by weight type (nil where the CPU lacks them).
var vectorTile = tileForms(tileCPU)

// tileForms returns the tile forms, or nil without the instructions they need (on).
func tileForms(on bool) map[dtype.Type]tileFunc {
	if !on {
		return nil
	}
	return map[dtype.Type]tileFunc{
		dtype.Q4_K: func(l *repack.Layout, w, xs, next []byte, xb, n int, s *tileScratch) {
			a := newTileArgs(l, w, xs, next, xb, n)
			q4KTile16(&w[0], &xs[0], &a, &s.acc[0], &s.out[0][0])
		},
		dtype.Q5_K: func(l *repack.Layout, w, xs, next []byte, xb, n int, s *tileScratch) {
			a := newTileArgs(l, w, xs, next, xb, n)
			q5KTile16(&w[0], &xs[0], &a, &s.acc[0], &s.out[0][0])
		},
		dtype.Q6_K: func(l *repack.Layout, w, xs, next []byte, xb, n int, s *tileScratch) {
			a := newTileArgs(l, w, xs, next, xb, n)
			q6KTile16(&w[0], &xs[0], &a, &s.acc[0], &s.out[0][0])
		},
	}
}

// newTileArgs describes a tile of K-quant rows and checks that w and xs hold what the
// assembly reads (it has no bounds checks). The tile prefetches next, spread over its
// super-blocks.
func newTileArgs(l *repack.Layout, w, xs, next []byte, xb, n int) tileArgs {
	if n < 1 || n > tileCols || l.Blocks < 1 || l.F16Off != 0 {
		panic("kernels: bad tile shape")
	}
	_, _ = w[:tileRows*l.RowStride], xs[:(n-1)*xb+int(l.Blocks)*q8KBytes]
	a := tileArgs{stride: l.RowStride, scale: l.ScaleOff, f16b: 2 * l.Blocks, blocks: l.Blocks, xstride: int64(xb), ncols: int64(n)}
	a.plane = l.Planes[0].Off
	if len(l.Planes) > 1 {
		a.plane2 = l.Planes[1].Off
	}
	if len(next) > 0 {
		a.pf = uintptr(unsafe.Pointer(&next[0]))
		a.pfn = uintptr((len(next)+63)/64+int(l.Blocks)-1) / uintptr(l.Blocks)
	}
	return a
}
