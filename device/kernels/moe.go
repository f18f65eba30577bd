package kernels

import (
	"fmt"
	"slices"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// The grouped MoE kernels: a token's whole expert FFN in two launches (plus the activation
// conversion between them), with the bits of the unfused sequence MoEMatVec(gate),
// MoEMatVec(up), SwiGLU, MoEMatVec(down, per slot), MoECombine.

// MoEGateUpArgs: for each slot s = n·K + k (n < N, k < K) and row o < Out,
//
//	Y[s][o] = SiLU32(g)·u,  g = row o of WGate[Ids[s]] · X[n],  u = row o of WUp[Ids[s]] · X[n]
//
// with g and u each the matvec contract's dot product (MoEMatVec's bits) and the product
// rounded once (SwiGLU's bits). WGate and WUp are 3-D expert tensors of one weight type in
// their repack layout (dims [Cols, Out, NExpert]); X holds N activation rows in the type's Act
// format. An id outside [0, NExpert) is an error.
type MoEGateUpArgs struct {
	WGate, WUp, X, Ids, Y    device.Ptr // Ids int32 [N·K]; Y f32 [N·K][Out]
	N, K, Out, Cols, NExpert int32
}

// MoEDownArgs: for each token n < N and row o < Rows,
//
//	acc = fma(Weights[n][k], y_k, acc) for k = 0 … K−1 from +0,  y_k = row o of W[Ids[n·K+k]] · X[n·K+k]
//	Out[n][o] = acc + float32(Sigmoid32(Gate[n])·Shared[n][o])   (if Shared != 0; else acc)
//
// — MoEMatVec (per slot) followed by MoECombine, bit for bit. W is the 3-D down-projection
// tensor in its repack layout (dims [Cols, Rows, NExpert]); X holds N·K activation rows (one
// per slot) in the type's Act format. Out must not overlap the inputs.
type MoEDownArgs struct {
	W, X, Ids, Weights, Shared, Gate, Out device.Ptr // Weights f32 [N][K]; Shared f32 [N][Rows]; Gate f32 [N]; Out f32 [N][Rows]
	N, K, Rows, Cols, NExpert             int32
}

var (
	moeGateUpKernels = map[dtype.Type]*device.Kernel[MoEGateUpArgs]{}
	moeDownKernels   = map[dtype.Type]*device.Kernel[MoEDownArgs]{}
)

// MoEGateUp returns the grouped gate/up/SwiGLU kernel for weight type t.
func MoEGateUp(t dtype.Type) (*device.Kernel[MoEGateUpArgs], error) {
	if k, ok := moeGateUpKernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no grouped MoE gate/up for weight type %s: %w", t, device.ErrUnsupported)
}

// MoEDown returns the grouped down-projection-and-combine kernel for weight type t.
func MoEDown(t dtype.Type) (*device.Kernel[MoEDownArgs], error) {
	if k, ok := moeDownKernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no grouped MoE down for weight type %s: %w", t, device.ErrUnsupported)
}

// registerMoE adds the grouped MoE kernels of format f (called by registerFormat).
func registerMoE(f *Format) {
	moeGateUpKernels[f.Type] = device.Register(&device.Kernel[MoEGateUpArgs]{
		EntryName:  "moe_gate_up_" + f.Type.String() + "_" + f.Act.String(),
		ModuleName: "moe",
		Shape: func(a MoEGateUpArgs) (device.Geometry, error) {
			if err := moeShape(f, a.N, a.K, a.Out, a.Cols, a.NExpert); err != nil {
				return device.Geometry{}, err
			}
			return device.Geometry{
				Grid:  device.Dim3{X: uint32((int(a.Out) + rowsPerBlock - 1) / rowsPerBlock), Y: uint32(int(a.N) * int(a.K)), Z: 1},
				Block: device.Dim3{X: 32 * rowsPerBlock, Y: 1, Z: 1},
			}, nil
		},
		Twin: func(x *device.Exec, a MoEGateUpArgs) error { return twinMoEGateUp(x, f, a) },
	})
	moeDownKernels[f.Type] = device.Register(&device.Kernel[MoEDownArgs]{
		EntryName:  "moe_down_" + f.Type.String() + "_" + f.Act.String(),
		ModuleName: "moe",
		Shape: func(a MoEDownArgs) (device.Geometry, error) {
			if err := moeShape(f, a.N, a.K, a.Rows, a.Cols, a.NExpert); err != nil {
				return device.Geometry{}, err
			}
			return device.Geometry{
				Grid:  device.Dim3{X: uint32((int(a.Rows) + rowsPerBlock - 1) / rowsPerBlock), Y: uint32(a.N), Z: 1},
				Block: device.Dim3{X: 32 * rowsPerBlock, Y: 1, Z: 1},
			}, nil
		},
		Twin: func(x *device.Exec, a MoEDownArgs) error { return twinMoEDown(x, f, a) },
	})
}

func moeShape(f *Format, n, k, out, cols, ne int32) error {
	if n <= 0 || k <= 0 || out <= 0 || cols <= 0 || ne <= 0 {
		return fmt.Errorf("bad shape n=%d k=%d out=%d cols=%d experts=%d", n, k, out, cols, ne)
	}
	if k > ne {
		return fmt.Errorf("%d experts per token of only %d", k, ne)
	}
	if int(cols)%f.Unit != 0 || int(cols)%f.Type.BlockSize() != 0 {
		return fmt.Errorf("row length %d is not a multiple of the %s block %d and unit %d", cols, f.Type, f.Type.BlockSize(), f.Unit)
	}
	return nil
}

// expertIDs reads and checks the N·K expert ids.
func expertIDs(x *device.Exec, p device.Ptr, slots, ne int) ([]int32, error) {
	ids, err := x.I32(p, slots)
	if err != nil {
		return nil, fmt.Errorf("expert ids: %w", err)
	}
	for s, e := range ids {
		if e < 0 || int(e) >= ne {
			return nil, fmt.Errorf("slot %d: expert %d outside %d experts", s, e, ne)
		}
	}
	return ids, nil
}

func twinMoEGateUp(x *device.Exec, f *Format, a MoEGateUpArgs) error {
	n, k, out, cols, ne := int(a.N), int(a.K), int(a.Out), int(a.Cols), int(a.NExpert)
	if err := moeShape(f, a.N, a.K, a.Out, a.Cols, a.NExpert); err != nil {
		return err
	}
	l, err := cachedLayout(f.Type, int64(cols), int64(out), int64(ne))
	if err != nil {
		return err
	}
	wg, err := x.U8(a.WGate, l.Size())
	if err != nil {
		return fmt.Errorf("gate weights: %w", err)
	}
	wu, err := x.U8(a.WUp, l.Size())
	if err != nil {
		return fmt.Errorf("up weights: %w", err)
	}
	xb := f.Act.RowBytes(cols)
	xs, err := x.U8(a.X, int64(n)*int64(xb))
	if err != nil {
		return fmt.Errorf("activations: %w", err)
	}
	ids, err := expertIDs(x, a.Ids, n*k, ne)
	if err != nil {
		return err
	}
	y, err := x.F32(a.Y, n*k*out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if tf := vectorTile[f.Type]; tf != nil && out >= tileRows {
		gs := groupSlots(ids, xb, func(s int) []byte { return xs[s/k*xb : (s/k+1)*xb] })
		whole := out / tileRows * tileRows
		x.For((out+tileRows-1)/tileRows, func(lo, hi int) {
			r0, r1 := lo*tileRows, min(hi*tileRows, out)
			if w1 := min(r1, whole); r0 < w1 {
				moeGateUpTiles(tf, l, wg, wu, gs, n*k, out, xb, r0, w1, y)
			}
			if r1 > whole { // the rows after the last whole tile, one by one
				a := max(r0, whole)
				rg, ru := newRowDot(f, l), newRowDot(f, l)
				g, u := make([]float32, r1-a), make([]float32, r1-a)
				for s := 0; s < n*k; s++ {
					xr := xs[s/k*xb : (s/k+1)*xb]
					for o := a; o < r1; o++ {
						off := int64(ids[s])*l.ExpertStride + int64(o)*l.RowStride
						rg.load(wg[off:])
						ru.load(wu[off:])
						g[o-a], u[o-a] = rg.dot(xr), ru.dot(xr)
					}
					swigluOp.apply(y[s*out+a:s*out+r1], g, u)
				}
			}
		})
		return nil
	}
	if vectorMulti[f.Type] != nil && expertShared(ids, ne) {
		gs := columnGroups(f, l, ids, xb, func(s int) []byte { return xs[s/k*xb : (s/k+1)*xb] })
		moeGateUpColumns(x, f, l, wg, wu, gs, xb, out, y)
		return nil
	}
	rf, pf := vectorRows[f.Type], l.ExpertStride > tileResident
	x.For(n*k*out, func(lo, hi int) {
		rg, ru := newRowDot(f, l), newRowDot(f, l)
		// The gate and up dot products of the range first, then SwiGLU's element-wise op over
		// them (with its vector form): the bits of Canon(SiLU32(gate)·up) per value.
		g, u := make([]float32, hi-lo), make([]float32, hi-lo)
		for i := lo; i < hi; {
			s, o := i/out, i%out
			end := min(hi, (s+1)*out) // the range's run of slot s's rows
			xr := xs[s/k*xb : (s/k+1)*xb]
			base := int64(ids[s]) * l.ExpertStride
			if rf != nil { // the rows form: the run in one call (PackedDot's bits per row)
				at := base + int64(o)*l.RowStride
				rf(l, wg[at:base+l.ExpertStride], xr, g[i-lo:end-lo], pf)
				rf(l, wu[at:base+l.ExpertStride], xr, u[i-lo:end-lo], pf)
				i = end
				continue
			}
			for ; i < end; i, o = i+1, o+1 {
				off := base + int64(o)*l.RowStride
				rg.load(wg[off:])
				ru.load(wu[off:])
				g[i-lo], u[i-lo] = rg.dot(xr), ru.dot(xr)
			}
		}
		swigluOp.apply(y[lo:hi], g, u)
	})
	return nil
}

// expertShared reports whether an expert has several of the slots (not so in a decode step,
// whose slots go to distinct experts: nothing to read once for several).
func expertShared(ids []int32, ne int) bool {
	seen := make([]bool, ne)
	for _, e := range ids {
		if seen[e] {
			return true
		}
		seen[e] = true
	}
	return false
}

// columnGroups is groupSlots with each group of several slots' rows also transposed
// (transposeQ8K) where f's several-column form reads them so.
func columnGroups(f *Format, l *repack.Layout, ids []int32, xb int, xrow func(s int) []byte) []expertGroup {
	gs := groupSlots(ids, xb, xrow)
	if vectorMultiT[f.Type] != nil {
		for i := range gs {
			if n := len(gs[i].slots); n > 1 {
				gs[i].xt = make([]byte, n*xb)
				transposeQ8K(gs[i].xt, gs[i].x, xb, n, int(l.Blocks))
			}
		}
	}
	return gs
}

// moeGateUpColumns is twinMoEGateUp for a format with a several-column form: each expert's
// slots' activation rows are gathered side by side (and transposed, where the form reads them
// so), and each of the expert's gate and up rows is applied to all of them in one pass over
// the row (rowDot.dots: every column dot's bits); SwiGLU then runs over each slot's range of
// rows as it does unfused.
func moeGateUpColumns(x *device.Exec, f *Format, l *repack.Layout, wg, wu []byte, gs []expertGroup, xb, out int, y []float32) {
	rf, pf := vectorRows[f.Type], l.ExpertStride > tileResident
	x.For(out, func(lo, hi int) {
		rg, ru := newRowDot(f, l), newRowDot(f, l)
		defer rg.release()
		defer ru.release()
		w := hi - lo
		for _, gr := range gs {
			ss := gr.slots
			rg.xt, ru.xt = gr.xt, gr.xt
			g, u := make([]float32, len(ss)*w), make([]float32, len(ss)*w) // slot j's rows at j·w
			if base := int64(gr.expert) * l.ExpertStride; len(ss) == 1 && rf != nil {
				// one slot: the rows form over the range, as the per-slot path
				at := base + int64(lo)*l.RowStride
				rf(l, wg[at:base+l.ExpertStride], gr.x, g, pf)
				rf(l, wu[at:base+l.ExpertStride], gr.x, u, pf)
				swigluOp.apply(y[ss[0]*out+lo:ss[0]*out+hi], g, u)
				continue
			}
			for o := lo; o < hi; o++ {
				off := int64(gr.expert)*l.ExpertStride + int64(o)*l.RowStride
				rg.load(wg[off:])
				ru.load(wu[off:])
				rg.dotsInto(gr.x, xb, len(ss), g[o-lo:], w, false)
				ru.dotsInto(gr.x, xb, len(ss), u[o-lo:], w, false)
			}
			for j, s := range ss {
				swigluOp.apply(y[s*out+lo:s*out+hi], g[j*w:(j+1)*w], u[j*w:(j+1)*w])
			}
		}
	})
}

func twinMoEDown(x *device.Exec, f *Format, a MoEDownArgs) error {
	n, k, rows, cols, ne := int(a.N), int(a.K), int(a.Rows), int(a.Cols), int(a.NExpert)
	if err := moeShape(f, a.N, a.K, a.Rows, a.Cols, a.NExpert); err != nil {
		return err
	}
	l, err := cachedLayout(f.Type, int64(cols), int64(rows), int64(ne))
	if err != nil {
		return err
	}
	w, err := x.U8(a.W, l.Size())
	if err != nil {
		return fmt.Errorf("expert weights: %w", err)
	}
	xb := f.Act.RowBytes(cols)
	xs, err := x.U8(a.X, int64(n*k)*int64(xb))
	if err != nil {
		return fmt.Errorf("activations: %w", err)
	}
	ids, err := expertIDs(x, a.Ids, n*k, ne)
	if err != nil {
		return err
	}
	weights, err := x.F32(a.Weights, n*k)
	if err != nil {
		return fmt.Errorf("expert weights: %w", err)
	}
	var shared, sg []float32 // sg: the shared expert's weight per token, Sigmoid32(Gate[t])
	if a.Shared != 0 {
		if shared, err = x.F32(a.Shared, n*rows); err != nil {
			return fmt.Errorf("shared expert: %w", err)
		}
		gate, err := x.F32(a.Gate, n)
		if err != nil {
			return fmt.Errorf("shared expert gate: %w", err)
		}
		sg = sigmoids(gate)
	}
	out, err := x.F32(a.Out, n*rows)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if tf := vectorTile[f.Type]; tf != nil && rows >= tileRows {
		gs := groupSlots(ids, xb, func(s int) []byte { return xs[s*xb : (s+1)*xb] })
		whole := rows / tileRows * tileRows
		x.For((rows+tileRows-1)/tileRows, func(lo, hi int) {
			r0, r1 := lo*tileRows, min(hi*tileRows, rows)
			if w1 := min(r1, whole); r0 < w1 {
				moeDownTiles(tf, l, w, gs, n, k, rows, xb, r0, w1, weights, shared, sg, out)
			}
			for t := 0; t < n && r1 > whole; t++ { // the rows after the last whole tile
				moeDownRows(f, l, w, xs, xb, ids, weights, shared, sg, out, k, rows, t, max(r0, whole), r1)
			}
		})
		return nil
	}
	if vectorMulti[f.Type] != nil && expertShared(ids, ne) {
		gs := columnGroups(f, l, ids, xb, func(s int) []byte { return xs[s*xb : (s+1)*xb] })
		moeDownColumns(x, f, l, w, gs, xb, weights, shared, sg, out, n, k, rows)
		return nil
	}
	rf, pf := vectorRows[f.Type], l.ExpertStride > tileResident
	x.For(n*rows, func(lo, hi int) {
		rd := newRowDot(f, l)
		var dots []float32 // with the rows form: slot e's products with a run's rows at e·m
		for j := lo; j < hi; {
			t, o := j/rows, j%rows
			end := min(hi, (t+1)*rows) // the range's run of token t's rows
			m := end - j
			if rf != nil {
				dots = slices.Grow(dots[:0], k*m)[:k*m]
				for e := 0; e < k; e++ {
					s := t*k + e
					base := int64(ids[s]) * l.ExpertStride
					rf(l, w[base+int64(o)*l.RowStride:base+l.ExpertStride], xs[s*xb:(s+1)*xb], dots[e*m:(e+1)*m], pf)
				}
			}
			for ; j < end; j, o = j+1, o+1 {
				var acc float32
				for e := 0; e < k; e++ {
					s := t*k + e
					var d float32
					if rf != nil {
						d = dots[e*m+m-(end-j)]
					} else {
						rd.load(w[int64(ids[s])*l.ExpertStride+int64(o)*l.RowStride:])
						d = rd.dot(xs[s*xb : (s+1)*xb])
					}
					acc = num.FMA32(weights[s], d, acc)
				}
				if shared != nil {
					acc += float32(sg[t] * shared[j])
				}
				out[j] = num.Canon(acc)
			}
		}
	})
	return nil
}

// moeDownColumns is twinMoEDown for a format with a several-column form: each expert's slots'
// activation rows gathered side by side (and transposed, where the form reads them so), each
// of the expert's rows applied to all of them in one pass (rowDot.dots: every column dot's
// bits); then each token's outputs combine its slots' products in slot order, as unfused.
func moeDownColumns(x *device.Exec, f *Format, l *repack.Layout, w []byte, gs []expertGroup, xb int, weights, shared, sg, out []float32, n, k, rows int) {
	rf, pf := vectorRows[f.Type], l.ExpertStride > tileResident
	x.For(rows, func(lo, hi int) {
		rd := newRowDot(f, l)
		defer rd.release()
		wd := hi - lo
		// slot s's products with rows lo … hi−1 at at[s]·wd: a group's slots side by side
		dot, at := make([]float32, n*k*wd), make([]int, n*k)
		base := 0
		for _, gr := range gs {
			rd.xt = gr.xt
			for j, s := range gr.slots {
				at[s] = base + j
			}
			if eb := int64(gr.expert) * l.ExpertStride; len(gr.slots) == 1 && rf != nil {
				// one slot: the rows form over the range
				rf(l, w[eb+int64(lo)*l.RowStride:eb+l.ExpertStride], gr.x, dot[base*wd:(base+1)*wd], pf)
				base++
				continue
			}
			for o := lo; o < hi; o++ {
				rd.load(w[int64(gr.expert)*l.ExpertStride+int64(o)*l.RowStride:])
				rd.dotsInto(gr.x, xb, len(gr.slots), dot[base*wd+o-lo:], wd, false)
			}
			base += len(gr.slots)
		}
		for t := 0; t < n; t++ {
			for o := lo; o < hi; o++ {
				j := t*rows + o
				var acc float32
				for e := 0; e < k; e++ {
					s := t*k + e
					acc = num.FMA32(weights[s], dot[at[s]*wd+o-lo], acc)
				}
				if shared != nil {
					acc += float32(sg[t] * shared[j])
				}
				out[j] = num.Canon(acc)
			}
		}
	})
}

// sigmoids returns Sigmoid32 of each value (a shared expert's gate per token, computed once
// for all of the token's rows).
func sigmoids(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = num.Sigmoid32(x)
	}
	return out
}

// moeDownRows computes MoEDown's outputs out[t][o] for token t and rows o in [a, b), one row
// at a time.
func moeDownRows(f *Format, l *repack.Layout, w, xs []byte, xb int, ids []int32, weights, shared, sg, out []float32, k, rows, t, a, b int) {
	rd := newRowDot(f, l)
	for o := a; o < b; o++ {
		j := t*rows + o
		var acc float32
		for e := 0; e < k; e++ {
			s := t*k + e
			rd.load(w[int64(ids[s])*l.ExpertStride+int64(o)*l.RowStride:])
			acc = num.FMA32(weights[s], rd.dot(xs[s*xb:(s+1)*xb]), acc)
		}
		if shared != nil {
			acc += float32(sg[t] * shared[j])
		}
		out[j] = num.Canon(acc)
	}
}
