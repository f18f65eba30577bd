package kernels

import (
	"sync"

	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Row tiles: where a weight type has a tile form (tile_amd64.go), the matvec twin computes
// tileRows weight rows at a time, each row's products with up to tileCols activation rows in
// one pass over the tile's bytes (which stay in the L1 and L2 caches for the next pass). A tile form gives every row exactly its PackedDot's
// bits (the same unit sums, the same fused multiply-adds into the same lanes in the same
// order, the same fold); only which rows share the instructions differs. Rows that do not
// fill a tile take the one-row forms.

// tileRows is the number of weight rows a tile form computes together.
const tileRows = 16

// tileCols is the most activation rows (columns) one pass over a tile takes.
const tileCols = 16

var tilePrefetch = true

// tileResident is the size up to which a matrix is taken to stay in the caches from one step
// to the next (a core's L2 holds it), so that asking for its next tile only costs instructions.
const tileResident = 256 << 10

// tileScratch is a tile form's working memory: the lane accumulators of every column
// ([column][lane][row]), the rows' fp16 scales of a group of super-blocks, and the folded
// results ([column][row]).
type tileScratch struct {
	acc [tileCols * 32 * tileRows]float32
	f16 [2][8][tileRows]uint16 // fp16 scale fields of 8 super-blocks, transposed (right after acc: tile_amd64.s)
	out [tileCols][tileRows]float32
}

// tileScratches recycles tile scratch (its contents need no clearing: the forms write every
// value before they read it).
var tileScratches = sync.Pool{New: func() any { return new(tileScratch) }}

// tileFunc computes the tileRows packed rows at w (w[r·RowStride:] is row r; w holds the whole
// tile) times the n ≤ tileCols activation rows xs[c·xb:], into s.out[c][r] (a NaN the
// canonical one: PackedDot's bits), and asks the caches for next (the bytes it reads after
// this tile, if any) as it goes.
type tileFunc = func(l *repack.Layout, w, xs, next []byte, xb, n int, s *tileScratch)

// matvecTiles computes rows [lo, hi) of a matvec — lo a multiple of tileRows — with the tile
// form where a whole tile fits and the one-row forms for the rest: y[c·rows + r] for every
// column c < n, stored or (acc) added.
func matvecTiles(tf tileFunc, f *Format, l *repack.Layout, w, xs []byte, xb, n, rows, lo, hi int, y []float32, acc bool) {
	s := tileScratches.Get().(*tileScratch)
	defer tileScratches.Put(s)
	stride := int(l.RowStride)
	r := lo
	for ; r+tileRows <= hi; r += tileRows {
		tile := w[r*stride : (r+tileRows)*stride]
		next := w[(r+tileRows)*stride:]
		next = next[:min(len(next), tileRows*stride)]
		if !tilePrefetch || len(w) <= tileResident {
			next = nil
		}
		for c0 := 0; c0 < n; c0 += tileCols {
			m := min(tileCols, n-c0)
			tf(l, tile, xs[c0*xb:], next, xb, m, s)
			next = nil // prefetched by the first pass
			for c := 0; c < m; c++ {
				out := y[(c0+c)*rows+r : (c0+c)*rows+r+tileRows]
				if !acc {
					copy(out, s.out[c][:])
					continue
				}
				for i, v := range s.out[c] {
					out[i] = num.Canon(out[i] + v)
				}
			}
		}
	}
	if r == hi {
		return
	}
	rd := newRowDot(f, l)
	vals := make([]float32, n)
	for ; r < hi; r++ {
		rd.load(w[int64(r)*l.RowStride:])
		rd.dots(xs, xb, vals)
		for c, v := range vals {
			if acc {
				v = num.Canon(y[c*rows+r] + v)
			}
			y[c*rows+r] = v
		}
	}
}

// layoutKey names a weight layout: a type and up to three GGUF dims.
type layoutKey struct {
	t    dtype.Type
	dims [3]int64
}

// layouts caches the layouts the twins compute on every launch.
var layouts sync.Map // layoutKey → *repack.Layout

// cachedLayout is repack.NewLayout(t, dims) for up to three dims, computed once per shape; the
// result is shared and must not be modified.
func cachedLayout(t dtype.Type, dims ...int64) (*repack.Layout, error) {
	k := layoutKey{t: t}
	copy(k.dims[:], dims)
	if l, ok := layouts.Load(k); ok {
		return l.(*repack.Layout), nil
	}
	l, err := repack.NewLayout(t, dims)
	if err != nil {
		return nil, err
	}
	layouts.Store(k, &l)
	return &l, nil
}
