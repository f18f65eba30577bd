package kernels

import (
	"slices"

	"verity/device/num"
	"verity/repack"
)

// The grouped MoE kernels with the tile forms (tile.go): the slots routed to one expert are
// that expert's columns, so a tile of an expert's rows is read once for all of them. Each
// slot's dot products are PackedDot's bits, and everything after them (SwiGLU, the weighted
// sum over a token's experts in slot order, the shared expert) is the one-row code's, so the
// results are the same bits.

// expertGroup is the slots routed to one expert and their activation rows, gathered.
type expertGroup struct {
	expert int
	slots  []int
	x      []byte // len(slots) rows of xb bytes
	xt     []byte // x transposed (transposeQ8K) for a several-column form that reads it so, or nil
}

// groupSlots groups slots 0 … len(ids)−1 by expert (experts in increasing order, slots in
// increasing order), gathering each slot's activation row xrow(s).
func groupSlots(ids []int32, xb int, xrow func(s int) []byte) []expertGroup {
	order := make([]int, len(ids))
	for s := range order {
		order[s] = s
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(ids[a]) - int(ids[b]) })
	var gs []expertGroup
	for i := 0; i < len(order); {
		e := int(ids[order[i]])
		j := i
		for j < len(order) && int(ids[order[j]]) == e {
			j++
		}
		g := expertGroup{expert: e, slots: order[i:j], x: make([]byte, (j-i)*xb)}
		for c, s := range g.slots {
			copy(g.x[c*xb:(c+1)*xb], xrow(s))
		}
		gs = append(gs, g)
		i = j
	}
	return gs
}

// expertTileDots sets dots[s][0:tileRows] to rows r … r+tileRows−1 of expert g.expert (w the
// whole 3-D tensor) times every slot s of g (PackedDot's bits).
func expertTileDots(tf tileFunc, l *repack.Layout, w []byte, g *expertGroup, xb, r int, s *tileScratch, dots [][tileRows]float32) {
	off := int64(g.expert)*l.ExpertStride + int64(r)*l.RowStride
	tile := w[off : off+tileRows*l.RowStride]
	for c0 := 0; c0 < len(g.slots); c0 += tileCols {
		m := min(tileCols, len(g.slots)-c0)
		tf(l, tile, g.x[c0*xb:], nil, xb, m, s)
		for c := 0; c < m; c++ {
			dots[g.slots[c0+c]] = s.out[c]
		}
	}
}

// moeGateUpTiles computes MoEGateUp's outputs y[s][o] for rows o in [lo, hi) (lo a multiple
// of tileRows, whole tiles only) and every slot.
func moeGateUpTiles(tf tileFunc, l *repack.Layout, wg, wu []byte, gs []expertGroup, slots, out, xb, lo, hi int, y []float32) {
	s := tileScratches.Get().(*tileScratch)
	defer tileScratches.Put(s)
	g, u := make([][tileRows]float32, slots), make([][tileRows]float32, slots)
	for r := lo; r < hi; r += tileRows {
		for i := range gs {
			expertTileDots(tf, l, wg, &gs[i], xb, r, s, g)
			expertTileDots(tf, l, wu, &gs[i], xb, r, s, u)
		}
		for sl := 0; sl < slots; sl++ {
			swigluOp.apply(y[sl*out+r:sl*out+r+tileRows], g[sl][:], u[sl][:])
		}
	}
}

// moeDownTiles computes MoEDown's outputs out[t][o] for rows o in [lo, hi) (whole tiles) and
// every token: the slots' dots first, then each token's weighted sum in slot order.
func moeDownTiles(tf tileFunc, l *repack.Layout, w []byte, gs []expertGroup, n, k, rows, xb, lo, hi int,
	weights, shared, sg, out []float32) {
	s := tileScratches.Get().(*tileScratch)
	defer tileScratches.Put(s)
	dots := make([][tileRows]float32, n*k)
	for r := lo; r < hi; r += tileRows {
		for i := range gs {
			expertTileDots(tf, l, w, &gs[i], xb, r, s, dots)
		}
		for t := 0; t < n; t++ {
			for i := 0; i < tileRows; i++ {
				j := t*rows + r + i
				var acc float32
				for e := 0; e < k; e++ {
					acc = num.FMA32(weights[t*k+e], dots[t*k+e][i], acc)
				}
				if shared != nil {
					acc += float32(sg[t] * shared[j])
				}
				out[j] = num.Canon(acc)
			}
		}
	}
}
