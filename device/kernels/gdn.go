package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/num"
)

// Gated DeltaNet (GDN) recurrent mixer: the causal depthwise convolution over the projected
// q/k/v channels, and the gated delta-rule scan. Both keep per-sequence state in slots of a
// state buffer; each row names the slot it reads (Src) and the slot it writes (Dst). Rows run
// in order, so a row sees the state an earlier row of the same launch wrote: a prefill chains
// its rows through one slot (Src = Dst), and a tree node reads its parent's slot and writes its
// own.

// GDNConvArgs: causal depthwise conv + SiLU over the C channels of each row, rows in order.
// Row r's window is the K−1 inputs saved in state slot Src[r] (oldest first) followed by X[r];
// Y[r][c] = SiLU32(Σ_k W[c][k]·window[k][c]) (fma chain over k = 0…K−1 from +0, k = 0 oldest);
// then slot Dst[r] receives the last K−1 inputs of the window. Src[r] == Dst[r] updates in place;
// a later row may read a slot an earlier row of the same launch wrote (prefill chains rows
// through one slot; tree nodes read their parent's slot) — so rows are processed in order.
//
// Channels are independent: the device runs a thread per channel, which walks the rows in
// order. Y may equal X. A slot holds K−1 rows of C values, oldest first; a fresh sequence starts
// from a zeroed slot.
type GDNConvArgs struct {
	X, W, State, Src, Dst, Y device.Ptr // X,Y f32 [Rows][C]; W f32 [C][K] (GGUF ssm_conv1d ne=[K,C]); State f32 [NStates][K-1][C]; Src,Dst int32 [Rows]
	Rows, C, K, NStates      int32
}

// gdnConvThreads is the thread-block size of the conv kernel (one thread per channel).
const gdnConvThreads = 256

var GDNConv = device.Register(&device.Kernel[GDNConvArgs]{
	EntryName: "gdn_conv_f32", ModuleName: "gdn",
	Shape: func(a GDNConvArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.C <= 0 || a.K <= 0 || a.NStates <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d channels=%d kernel=%d states=%d", a.Rows, a.C, a.K, a.NStates)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32((int(a.C) + gdnConvThreads - 1) / gdnConvThreads), Y: 1, Z: 1}, Block: device.Dim3{X: gdnConvThreads, Y: 1, Z: 1}}, nil
	},
	Twin: twinGDNConv,
})

func twinGDNConv(x *device.Exec, a GDNConvArgs) error {
	rows, c, k, ns := int(a.Rows), int(a.C), int(a.K), int(a.NStates)
	in, err := x.F32(a.X, rows*c)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	w, err := x.F32(a.W, c*k)
	if err != nil {
		return fmt.Errorf("conv weights: %w", err)
	}
	slot := (k - 1) * c
	st, err := x.F32(a.State, ns*slot)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	src, dst, err := stateSlots(x, a.Src, a.Dst, rows, ns)
	if err != nil {
		return err
	}
	out, err := x.F32(a.Y, rows*c)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	x.For(c, func(lo, hi int) {
		win := make([]float32, k)
		ones := make([]float32, hi-lo)
		for i := range ones {
			ones[i] = 1
		}
		defer func() { // SiLU over the range's outputs, row by row, with its vector form
			for r := 0; r < rows; r++ {
				y := out[r*c+lo : r*c+hi]
				siluOp.apply(y, y, ones)
			}
		}()
		for ch := lo; ch < hi; ch++ {
			wc := w[ch*k : (ch+1)*k]
			for r := 0; r < rows; r++ {
				s := st[int(src[r])*slot:]
				for j := 0; j < k-1; j++ {
					win[j] = s[j*c+ch]
				}
				win[k-1] = in[r*c+ch]
				var acc float32
				for j, v := range win {
					acc = num.FMA32(wc[j], v, acc)
				}
				out[r*c+ch] = acc // SiLU32 follows (the deferred pass)
				d := st[int(dst[r])*slot:]
				for j := 0; j < k-1; j++ {
					d[j*c+ch] = win[j+1]
				}
			}
		}
	})
	return nil
}

// siluOp is SiLU32 alone, as an element-wise op whose b is 1: SwiGLU's vector form then has its
// bits (SiLU32's only NaN is the canonical one, and v·1 = v for every other value).
var siluOp = binaryOp{scalar: func(a, _ float32) float32 { return num.SiLU32(a) }, vector: vectorSwiGLU}

// stateSlots reads the Src and Dst slot lists of rows rows and checks every slot is below ns.
func stateSlots(x *device.Exec, srcP, dstP device.Ptr, rows, ns int) (src, dst []int32, err error) {
	if src, err = x.I32(srcP, rows); err != nil {
		return nil, nil, fmt.Errorf("source slots: %w", err)
	}
	if dst, err = x.I32(dstP, rows); err != nil {
		return nil, nil, fmt.Errorf("destination slots: %w", err)
	}
	for r := 0; r < rows; r++ {
		if src[r] < 0 || int(src[r]) >= ns {
			return nil, nil, fmt.Errorf("row %d: source slot %d outside %d state slots", r, src[r], ns)
		}
		if dst[r] < 0 || int(dst[r]) >= ns {
			return nil, nil, fmt.Errorf("row %d: destination slot %d outside %d state slots", r, dst[r], ns)
		}
	}
	return src, dst, nil
}

// GDNScanArgs: the gated delta rule for each row (in order) and each v-head h, reading the
// row's post-conv channels QKV[r] = [q: NK·D | k: NK·D | v: NV·D], raw gate inputs Beta[r][h]
// (W_β n) and Alpha[r][h] (W_α n), per-head parameters A[h] (ssm_a) and DtBias[h]; state
// slot Src[r] → Dst[r] as for the conv ([NStates][NV][D][D], S[h][i][j], i key dim, j value dim).
// V-head h uses key/query head h mod NK. Out[r][h][j] = o_j. Eps is the L2-norm epsilon.
//
// NV must be a multiple of NK. The device runs one thread block per v-head, a thread per value
// column j holding column j of S_h, and walks the rows in order. Per row r and v-head h, with
// i_k = h mod NK, q = QKV[r][i_k·D …], k = QKV[r][NK·D + i_k·D …], v = QKV[r][2·NK·D + h·D …]:
//
//   - L2 norms: ssq = lane l folds x_i² for i = l, l+32, … by acc = fma(x_i, x_i, acc) from +0,
//     then num.WarpSum; n = 1 / Max32(Sqrt32(ssq), Eps) (each step rounded); the query also gets
//     s = 1 / Sqrt32(float32(D)):  k̂_i = float32(k_i·n_k),  q̂_i = float32(float32(q_i·n_q)·s);
//   - β = Sigmoid32(Beta[r][h]);  g = float32(A[h]·Softplus32(Alpha[r][h] + DtBias[h]));
//     e = Exp32(g), once per (row, head);
//   - per column j, with i running 0 … D−1 in order, all chains from +0:
//     d_i = float32(e·S[i][j]);  u_j = fma(d_i, k̂_i, u_j);
//     δ_j = float32(float32(v_j − u_j)·β);
//     S'[i][j] = fma(k̂_i, δ_j, d_i);  o_j = fma(S'[i][j], q̂_i, o_j);
//   - S' goes to slot Dst[r], o to Out[r][h].
//
// That is S ← e^g·S; u = Sᵀk̂; S ← S + k̂ ⊗ β(v − u); o = Sᵀq̂, the output read after the write.
type GDNScanArgs struct {
	QKV, Beta, Alpha, A, DtBias, State, Src, Dst, Out device.Ptr
	Rows, NK, NV, D, NStates                          int32
	Eps                                               float32
}

var GDNScan = device.Register(&device.Kernel[GDNScanArgs]{
	EntryName: "gdn_scan_f32", ModuleName: "gdn",
	Shape: func(a GDNScanArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NK <= 0 || a.NV <= 0 || a.D <= 0 || a.NStates <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d k_heads=%d v_heads=%d head_dim=%d states=%d", a.Rows, a.NK, a.NV, a.D, a.NStates)
		}
		if a.NV%a.NK != 0 {
			return device.Geometry{}, fmt.Errorf("%d v-heads are not a multiple of %d k-heads", a.NV, a.NK)
		}
		if a.D > 1024 {
			return device.Geometry{}, fmt.Errorf("head dim %d above the 1024 threads of a block", a.D)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.NV), Y: 1, Z: 1}, Block: device.Dim3{X: uint32((a.D + 31) / 32 * 32), Y: 1, Z: 1}}, nil
	},
	Twin: twinGDNScan,
})

func twinGDNScan(x *device.Exec, a GDNScanArgs) error {
	rows, nk, nv, d, ns := int(a.Rows), int(a.NK), int(a.NV), int(a.D), int(a.NStates)
	width := (2*nk + nv) * d
	qkv, err := x.F32(a.QKV, rows*width)
	if err != nil {
		return fmt.Errorf("qkv: %w", err)
	}
	beta, err := x.F32(a.Beta, rows*nv)
	if err != nil {
		return fmt.Errorf("beta: %w", err)
	}
	alpha, err := x.F32(a.Alpha, rows*nv)
	if err != nil {
		return fmt.Errorf("alpha: %w", err)
	}
	ssmA, err := x.F32(a.A, nv)
	if err != nil {
		return fmt.Errorf("ssm_a: %w", err)
	}
	dtBias, err := x.F32(a.DtBias, nv)
	if err != nil {
		return fmt.Errorf("dt bias: %w", err)
	}
	hs := d * d // one head's state
	slot := nv * hs
	st, err := x.F32(a.State, ns*slot)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	src, dst, err := stateSlots(x, a.Src, a.Dst, rows, ns)
	if err != nil {
		return err
	}
	out, err := x.F32(a.Out, rows*nv*d)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	qScale := 1 / num.Sqrt32(float32(d))
	x.For(nv, func(lo, hi int) {
		q := make([]float32, d)
		k := make([]float32, d)
		for h := lo; h < hi; h++ {
			ik := h % nk
			for r := 0; r < rows; r++ {
				row := qkv[r*width : (r+1)*width]
				l2Normalize(k, row[(nk+ik)*d:(nk+ik+1)*d], a.Eps)
				l2Normalize(q, row[ik*d:(ik+1)*d], a.Eps)
				for i := range q {
					q[i] *= qScale
				}
				b := num.Sigmoid32(beta[r*nv+h])
				g := ssmA[h] * num.Softplus32(alpha[r*nv+h]+dtBias[h])
				// The state is updated in place in its destination slot (a decode step's source
				// and destination are the same slot; a tree node's is copied there first).
				s := st[int(dst[r])*slot+h*hs:][:hs]
				if src[r] != dst[r] {
					copy(s, st[int(src[r])*slot+h*hs:][:hs])
				}
				deltaRule(out[(r*nv+h)*d:(r*nv+h+1)*d], s, q, k, row[(2*nk+h)*d:(2*nk+h+1)*d], num.Exp32(g), b)
			}
		}
	})
	return nil
}

// l2Normalize writes y = x / max(‖x‖, eps) in the scan's order (see GDNScanArgs).
func l2Normalize(y, x []float32, eps float32) {
	var acc [32]float32
	for i, v := range x {
		acc[i&31] = num.FMA32(v, v, acc[i&31])
	}
	n := 1 / num.Max32(num.Sqrt32(num.WarpTotal(&acc)), eps)
	for i, v := range x {
		y[i] = num.Canon(v * n)
	}
}

// deltaRule updates one head's state s (D×D, s[i*D+j] = S[i][j]) in place with decay e, write
// strength b, normalised key k, scaled query q and value v, and writes o = S'ᵀq; with the
// vector form (simd.go) where the CPU has it.
func deltaRule(o, s, q, k, v []float32, e, b float32) {
	if !vectorDeltaRule(o, s, q, k, v, e, b) {
		portableDeltaRule(o, s, q, k, v, e, b)
	}
}

// portableDeltaRule is deltaRule in Go: column j's chains over i in order.
func portableDeltaRule(o, s, q, k, v []float32, e, b float32) {
	d := len(q)
	for j := 0; j < d; j++ {
		var u float32
		for i := 0; i < d; i++ {
			di := num.Canon(e * s[i*d+j])
			s[i*d+j] = di
			u = num.FMA32(di, k[i], u)
		}
		delta := (v[j] - u) * b
		var oj float32
		for i := 0; i < d; i++ {
			si := num.FMA32(k[i], delta, s[i*d+j])
			s[i*d+j] = si
			oj = num.FMA32(si, q[i], oj)
		}
		o[j] = oj
	}
}
