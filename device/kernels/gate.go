package kernels

import (
	"fmt"

	"verity/device"
)

// GatedNormArgs: Y[r][h] = RMSNorm(X[r][h])·W ⊙ SiLU32(Z[r][h]) for Heads heads of D values
// (RMSNorm as the rmsnorm kernel's contract, weights W [D] shared by heads).
//
// Order per head: r = the rmsnorm scale of x (lane-strided fma of squares, num.WarpSum,
// mean = sum/D, r = 1/Sqrt32(mean + Eps)); y_i = float32(float32(float32(x_i·r)·w_i)·SiLU32(z_i)).
// Y may equal X or Z. This is the output norm of the GDN mixer (ssm_norm gated by z).
type GatedNormArgs struct {
	X, Z, W, Y     device.Ptr // X, Z, Y float32 [Rows][Heads][D]; W float32 [D]
	Rows, Heads, D int32
	Eps            float32
}

var GatedNorm = device.Register(&device.Kernel[GatedNormArgs]{
	EntryName: "gated_rmsnorm_f32", ModuleName: "gate",
	Shape: func(a GatedNormArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Heads <= 0 || a.D <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d head_dim=%d", a.Rows, a.Heads, a.D)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: uint32(a.Heads), Z: 1}, Block: device.Dim3{X: 32, Y: 1, Z: 1}}, nil
	},
	Twin: twinGatedNorm,
})

func twinGatedNorm(x *device.Exec, a GatedNormArgs) error {
	groups, d := int(a.Rows)*int(a.Heads), int(a.D)
	in, err := x.F32(a.X, groups*d)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	z, err := x.F32(a.Z, groups*d)
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	w, err := x.F32(a.W, d)
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	out, err := x.F32(a.Y, groups*d)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	x.For(groups, func(lo, hi int) {
		n := make([]float32, d)
		for g := lo; g < hi; g++ {
			xs, zs, ys := in[g*d:(g+1)*d], z[g*d:(g+1)*d], out[g*d:(g+1)*d]
			s := rmsScale(xs, a.Eps)
			for i := range xs {
				n[i] = float32(xs[i]*s) * w[i]
			}
			// Canon(n·SiLU32(z)) = Canon(SiLU32(z)·n): SwiGLU's op, with its vector form
			swigluOp.apply(ys, zs, n)
		}
	})
	return nil
}

// SplitGateArgs: X[r] holds Heads blocks of [q (D) | gate (D)]; Q[r][h] = first half, G[r][h] = second.
//
// This unpacks the gated-attention query projection (attn_q gives 2·D values per head). Values
// are copied bit for bit. Q and G must not overlap X.
type SplitGateArgs struct {
	X, Q, G        device.Ptr // X float32 [Rows][Heads][2·D]; Q, G float32 [Rows][Heads][D]
	Rows, Heads, D int32
}

var SplitGate = device.Register(&device.Kernel[SplitGateArgs]{
	EntryName: "split_gate_f32", ModuleName: "gate",
	Shape: func(a SplitGateArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Heads <= 0 || a.D <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d head_dim=%d", a.Rows, a.Heads, a.D)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: uint32(a.Heads), Z: 1}, Block: device.Dim3{X: 128, Y: 1, Z: 1}}, nil
	},
	Twin: twinSplitGate,
})

func twinSplitGate(x *device.Exec, a SplitGateArgs) error {
	groups, d := int(a.Rows)*int(a.Heads), int(a.D)
	in, err := x.F32(a.X, 2*groups*d)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	q, err := x.F32(a.Q, groups*d)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	g, err := x.F32(a.G, groups*d)
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	x.For(groups, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			copy(q[i*d:(i+1)*d], in[2*i*d:(2*i+1)*d])
			copy(g[i*d:(i+1)*d], in[(2*i+1)*d:(2*i+2)*d])
		}
	})
	return nil
}
