package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
)

// Mixture-of-experts routing: the router (softmax, top-k, renormalisation), the expert
// matvec over the selected experts of a 3-D expert tensor, and the weighted combination of the
// expert outputs with the gated shared expert.
//
// A token n with K selected experts owns the K slots s = n·K + k, k = 0 … K−1 in rank order;
// Ids, Weights and the expert outputs are laid out by slot.

// RouterArgs: softmax over NExpert logits per row, top K (ties to the lower index), weights
// renormalised over the K: Ids[r][k], Weights[r][k] in rank order (largest first).
//
// Order per row (one warp): m = num.StridedMax(logits); e_i = Exp32(x_i − m);
// sum = num.StridedSum(e) (lane-strided adds, then num.WarpSum); p_i = e_i / sum. The K largest
// p_i are taken in rank order, equal p going to the lower expert index and a NaN ranking below
// every number; t = (((+0 + p_0) + p_1) + … ) over the K in rank order; Weights[r][k] = p_k / t.
type RouterArgs struct {
	Logits, Ids, Weights device.Ptr // f32 [Rows][NExpert], int32 [Rows][K], f32 [Rows][K]
	Rows, NExpert, K     int32
}

var Router = device.Register(&device.Kernel[RouterArgs]{
	EntryName: "moe_router_f32", ModuleName: "routing",
	Shape: func(a RouterArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NExpert <= 0 || a.K <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d experts=%d k=%d", a.Rows, a.NExpert, a.K)
		}
		if a.K > a.NExpert {
			return device.Geometry{}, fmt.Errorf("top %d of only %d experts", a.K, a.NExpert)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 32, Y: 1, Z: 1}}, nil
	},
	Twin: twinRouter,
})

func twinRouter(x *device.Exec, a RouterArgs) error {
	rows, ne, k := int(a.Rows), int(a.NExpert), int(a.K)
	if k > ne {
		return fmt.Errorf("top %d of only %d experts", k, ne)
	}
	logits, err := x.F32(a.Logits, rows*ne)
	if err != nil {
		return fmt.Errorf("logits: %w", err)
	}
	ids, err := x.I32(a.Ids, rows*k)
	if err != nil {
		return fmt.Errorf("ids: %w", err)
	}
	weights, err := x.F32(a.Weights, rows*k)
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	x.For(rows, func(lo, hi int) {
		p := make([]float32, ne)
		taken := make([]bool, ne)
		for r := lo; r < hi; r++ {
			routeRow(ids[r*k:(r+1)*k], weights[r*k:(r+1)*k], p, taken, logits[r*ne:(r+1)*ne])
		}
	})
	return nil
}

// routeRow routes one row of logits; p and taken are scratch of len(logits).
func routeRow(ids []int32, w, p []float32, taken []bool, logits []float32) {
	m := num.StridedMax(logits)
	for i, v := range logits {
		p[i] = num.Exp32(v - m)
	}
	sum := num.StridedSum(p)
	for i := range p {
		p[i] /= sum
		taken[i] = false
	}
	var t float32
	for k := range ids {
		best := -1
		for i, v := range p {
			if taken[i] {
				continue
			}
			if best < 0 || v > p[best] || (p[best] != p[best] && v == v) {
				best = i
			}
		}
		taken[best] = true
		ids[k] = int32(best)
		w[k] = p[best]
		t += p[best]
	}
	for k := range w {
		w[k] = num.Canon(w[k] / t)
	}
}

// MoEMatVecArgs: for each slot s = n·K + k (n < N, k < K): Y[s] = W[Ids[s]]·x, with x = X[s] if
// XPerSlot != 0, else X[n] (all K experts of a token read the token's row); W is the 3-D expert
// tensor (NExpert matrices of Out rows × Cols values) in its repack device layout (dims
// [Cols, Out, NExpert]: expert e's matrix at e·ExpertStride, each row 256-byte aligned);
// activations converted to the weight type's Act format as for MatVec. Per weight type, like
// MatVec: one kernel per type, obtained with MoEMatVec(t dtype.Type). Each (slot, row) dot
// product follows exactly the matvec reduction contract (reuse the Format's Dot).
//
// So Y[s][o] has the bits MatVec gives for row o of expert Ids[s]'s matrix and the same
// activation row. An id outside [0, NExpert) is an error.
type MoEMatVecArgs struct {
	// W: NExpert·Out weight rows; X: N rows (N·K with XPerSlot) of Act.RowBytes(Cols) bytes;
	// Ids int32 [N·K]; Y f32 [N·K][Out]
	W, X, Ids, Y                       device.Ptr
	N, K, Out, Cols, NExpert, XPerSlot int32
}

var moeMatVecKernels = map[dtype.Type]*device.Kernel[MoEMatVecArgs]{}

// MoEMatVec returns the expert matvec kernel for weight type t.
func MoEMatVec(t dtype.Type) (*device.Kernel[MoEMatVecArgs], error) {
	if k, ok := moeMatVecKernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no expert matvec for weight type %s: %w", t, device.ErrUnsupported)
}

// The expert matvecs exist for every weight format. The format files register their formats
// in their own init functions, which run before this one because Go initialises a package's
// files in file-name order and all of them sort before this file (a test checks that every
// weight type has its expert matvec).
func newMoEMatVec(f *Format) *device.Kernel[MoEMatVecArgs] {
	return &device.Kernel[MoEMatVecArgs]{
		EntryName:  "moe_matvec_" + f.Type.String() + "_" + f.Act.String(),
		ModuleName: "routing",
		Shape: func(a MoEMatVecArgs) (device.Geometry, error) {
			if a.N <= 0 || a.K <= 0 || a.Out <= 0 || a.Cols <= 0 || a.NExpert <= 0 {
				return device.Geometry{}, fmt.Errorf("bad shape n=%d k=%d out=%d cols=%d experts=%d", a.N, a.K, a.Out, a.Cols, a.NExpert)
			}
			if a.K > a.NExpert {
				return device.Geometry{}, fmt.Errorf("%d experts per token of only %d", a.K, a.NExpert)
			}
			if int(a.Cols)%f.Unit != 0 || int(a.Cols)%f.Type.BlockSize() != 0 {
				return device.Geometry{}, fmt.Errorf("row length %d is not a multiple of the %s block %d and unit %d", a.Cols, f.Type, f.Type.BlockSize(), f.Unit)
			}
			return device.Geometry{
				Grid:  device.Dim3{X: uint32((int(a.Out) + rowsPerBlock - 1) / rowsPerBlock), Y: uint32(int(a.N) * int(a.K)), Z: 1},
				Block: device.Dim3{X: 32 * rowsPerBlock, Y: 1, Z: 1},
			}, nil
		},
		Twin: func(x *device.Exec, a MoEMatVecArgs) error { return twinMoEMatVec(x, f, a) },
	}
}

func twinMoEMatVec(x *device.Exec, f *Format, a MoEMatVecArgs) error {
	n, k, out, cols, ne := int(a.N), int(a.K), int(a.Out), int(a.Cols), int(a.NExpert)
	if k > ne {
		return fmt.Errorf("%d experts per token of only %d", k, ne)
	}
	l, err := cachedLayout(f.Type, int64(cols), int64(out), int64(ne))
	if err != nil {
		return err
	}
	w, err := x.U8(a.W, l.Size())
	if err != nil {
		return fmt.Errorf("expert weights: %w", err)
	}
	slots := n * k
	xRows := n
	if a.XPerSlot != 0 {
		xRows = slots
	}
	xb := f.Act.RowBytes(cols)
	xs, err := x.U8(a.X, int64(xRows)*int64(xb))
	if err != nil {
		return fmt.Errorf("activations: %w", err)
	}
	ids, err := x.I32(a.Ids, slots)
	if err != nil {
		return fmt.Errorf("expert ids: %w", err)
	}
	for s, e := range ids {
		if e < 0 || int(e) >= ne {
			return fmt.Errorf("slot %d: expert %d outside %d experts", s, e, ne)
		}
	}
	y, err := x.F32(a.Y, slots*out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	x.For(slots*out, func(lo, hi int) {
		rd := newRowDot(f, l)
		for i := lo; i < hi; i++ {
			s, o := i/out, i%out
			xr := s / k
			if a.XPerSlot != 0 {
				xr = s
			}
			rd.load(w[int64(ids[s])*l.ExpertStride+int64(o)*l.RowStride:])
			y[i] = rd.dot(xs[xr*xb : (xr+1)*xb])
		}
	})
	return nil
}

// MoECombineArgs: Out[n] = Σ_k Weights[n][k]·Y[n·K+k] (fma chain over k = 0…K−1 from +0),
// then, if Shared != 0: Out[n] = Out[n] + Sigmoid32(Gate[n])·Shared[n] (product rounded, then add).
//
// Per value i: acc = fma(Weights[n][k], Y[n·K+k][i], acc) for k in order from +0; with a
// shared expert, Out[n][i] = acc + float32(Sigmoid32(Gate[n])·Shared[n][i]). Gate is read only
// when Shared is set. Out may equal Shared but must not overlap Y.
type MoECombineArgs struct {
	Y, Weights, Shared, Gate, Out device.Ptr // f32 [N·K][Width], [N][K], [N][Width], [N], [N][Width]
	N, K, Width                   int32
}

var MoECombine = device.Register(&device.Kernel[MoECombineArgs]{
	EntryName: "moe_combine_f32", ModuleName: "routing",
	Shape: func(a MoECombineArgs) (device.Geometry, error) {
		if a.N <= 0 || a.K <= 0 || a.Width <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape n=%d k=%d width=%d", a.N, a.K, a.Width)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32((int(a.Width) + 255) / 256), Y: uint32(a.N), Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
	},
	Twin: twinMoECombine,
})

func twinMoECombine(x *device.Exec, a MoECombineArgs) error {
	n, k, width := int(a.N), int(a.K), int(a.Width)
	y, err := x.F32(a.Y, n*k*width)
	if err != nil {
		return fmt.Errorf("expert outputs: %w", err)
	}
	w, err := x.F32(a.Weights, n*k)
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	var shared, sg []float32 // sg: the shared expert's weight per token, Sigmoid32(Gate[t])
	if a.Shared != 0 {
		if shared, err = x.F32(a.Shared, n*width); err != nil {
			return fmt.Errorf("shared expert: %w", err)
		}
		gate, err := x.F32(a.Gate, n)
		if err != nil {
			return fmt.Errorf("shared expert gate: %w", err)
		}
		sg = sigmoids(gate)
	}
	out, err := x.F32(a.Out, n*width)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	x.For(n*width, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			t, i := j/width, j%width
			var acc float32
			for e := 0; e < k; e++ {
				acc = num.FMA32(w[t*k+e], y[(t*k+e)*width+i], acc)
			}
			if shared != nil {
				acc += float32(sg[t] * shared[j])
			}
			out[j] = num.Canon(acc)
		}
	})
	return nil
}
