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

//go:noescape
func q4KRowsVNNI(w, x *byte, a *rowsArgs, out *float32)

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

// rowsPrepBytes is the size of one super-block's prepared activations (tile_amd64.s).
const rowsPrepBytes = 384

// rowsPreps recycles prepared activations.
var rowsPreps = sync.Pool{New: func() any { return new([]byte) }}

// rowsPrep returns n bytes of scratch for a rows form's prepared activations, 32-byte aligned,
// and the pooled buffer they lie in, for rowsPreps.Put.
func rowsPrep(n int) ([]byte, *[]byte) {
	bp := rowsPreps.Get().(*[]byte)
	if cap(*bp) < n+32 {
		*bp = make([]byte, n+32)
	}
	p := (*bp)[:n+32]
	off := int(-uintptr(unsafe.Pointer(&p[0])) & 31)
	return p[off : off+n], bp
}

// prepRowsK lays out the q8_K activation row x (blocks super-blocks) as q4KRowsVNNI and (q6)
// q6KRowsVNNI read it, in dst (blocks·rowsPrepBytes bytes): per super-block the quants of
// values 0-15 of units 0-3, of values 16-31 of units 0-3, the same for units 4-7 (16 bytes a
// unit); then for q6_K 32·bsums[g] as int32 with lane k holding groups 2k, 2k+1, 2k+8, 2k+9,
// for q4_K bsums[2s] + bsums[2s+1] as int32 for units s = 0 … 7; then d.
func prepRowsK(dst, x []byte, blocks int, q6 bool) {
	for i := 0; i < blocks; i++ {
		y, p := x[i*q8KBytes:(i+1)*q8KBytes], dst[i*rowsPrepBytes:(i+1)*rowsPrepBytes]
		q := y[q8KQs : q8KQs+256]
		for u := 0; u < 8; u++ {
			h, k := u/4, u%4
			copy(p[128*h+16*k:], q[32*u:32*u+16])
			copy(p[128*h+64+16*k:], q[32*u+16:32*u+32])
		}
		if q6 {
			for k := 0; k < 4; k++ {
				for j, g := range [4]int{2 * k, 2*k + 1, 2*k + 8, 2*k + 9} {
					binary.LittleEndian.PutUint32(p[256+16*k+4*j:], uint32(32*q8KSum(y, g)))
				}
			}
		} else {
			for s := 0; s < 8; s++ {
				binary.LittleEndian.PutUint32(p[256+4*s:], uint32(q8KSum(y, 2*s)+q8KSum(y, 2*s+1)))
			}
		}
		copy(p[320:324], y[:4])
	}
}

// rowsVNNI wraps a K-quant rows form with AVX-512 VNNI: bounds, the prepared activations.
func rowsVNNI(q6 bool, run func(w, x *byte, a *rowsArgs, out *float32)) rowsFunc {
	return func(l *repack.Layout, w, x []byte, out []float32, pf bool) {
		if len(out) == 0 {
			return
		}
		a := newRowsArgs(l, w, x, len(out), pf)
		p, bp := rowsPrep(int(l.Blocks) * rowsPrepBytes)
		defer rowsPreps.Put(bp)
		prepRowsK(p, x, int(l.Blocks), q6)
		run(&w[0], &p[0], &a, &out[0])
	}
}
