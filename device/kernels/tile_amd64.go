//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"verity/device/dtype"
	"verity/repack"
)

// tileCPU: the CPU has what the tile forms and q6KRowsVNNI (tile_amd64.s) use — AVX-512 F, BW
// and VL with VNNI — besides the vector forms' AVX2, FMA and F16C.
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

//go:noescape
func q6KRowsVNNI(w, x *byte, a *rowsArgs, out *float32)

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

// q6KPrepBytes is the size of one super-block's prepared activations (tile_amd64.s).
const q6KPrepBytes = 384

// q6KPreps recycles prepared activations.
var q6KPreps = sync.Pool{New: func() any { return new([]byte) }}

// prepQ6KRows lays out the q8_K activation row x (blocks super-blocks) as q6KRowsVNNI reads
// it, in dst (blocks·q6KPrepBytes bytes): per super-block the quants of values 0-15 of units
// 0-3, of values 16-31 of units 0-3, the same for units 4-7 (16 bytes a unit), then 32·bsums[g]
// as int32 with lane k holding groups 2k, 2k+1, 2k+8, 2k+9, then d.
func prepQ6KRows(dst, x []byte, blocks int) {
	for i := 0; i < blocks; i++ {
		y, p := x[i*q8KBytes:(i+1)*q8KBytes], dst[i*q6KPrepBytes:(i+1)*q6KPrepBytes]
		q := y[q8KQs : q8KQs+256]
		for u := 0; u < 8; u++ {
			h, k := u/4, u%4
			copy(p[128*h+16*k:], q[32*u:32*u+16])
			copy(p[128*h+64+16*k:], q[32*u+16:32*u+32])
		}
		for k := 0; k < 4; k++ {
			for j, g := range [4]int{2 * k, 2*k + 1, 2*k + 8, 2*k + 9} {
				binary.LittleEndian.PutUint32(p[256+16*k+4*j:], uint32(32*q8KSum(y, g)))
			}
		}
		copy(p[320:324], y[:4])
	}
}

// rowsQ6KVNNI is q6_K's rows form with AVX-512 VNNI.
func rowsQ6KVNNI(l *repack.Layout, w, x []byte, out []float32) {
	if len(out) == 0 {
		return
	}
	a := newRowsArgs(l, w, x, len(out))
	bp := q6KPreps.Get().(*[]byte)
	defer q6KPreps.Put(bp)
	n := int(l.Blocks) * q6KPrepBytes
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	p := (*bp)[:n]
	prepQ6KRows(p, x, int(l.Blocks))
	q6KRowsVNNI(&w[0], &p[0], &a, &out[0])
}
