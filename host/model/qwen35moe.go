package model

import (
	"fmt"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/gguf"
)

// qwen35moe: Qwen3.5-MoE / Qwen3-Next. A hybrid stack: layer i is gated full attention when
// (i+1) % full_attention_interval == 0 and a Gated DeltaNet (recurrent) layer otherwise; every
// layer's FFN is a softmax-routed top-k MoE plus a sigmoid-gated shared expert.
//
//	h = x + Mixer(rmsnorm(x)·attn_norm);  x = h + MoE(rmsnorm(h)·post_attention_norm)
//	attention: [q_h | gate_h] = Wq n; per-head rmsnorm of q, k; partial NEOX rope (multi-section
//	           positions (p, p, p, 0) for text); y = Wo (attention ⊙ sigmoid(gate))
//	GDN:       qkv = Wqkv n → causal conv (state: last K−1 inputs) → silu → split;
//	           l2-normalised q, k (q/√d); β = sigmoid(Wβ n); g = ssm_a·softplus(Wα n + dt_bias);
//	           v-head h reads key head h mod n_k; S ← e^g S; S += k⊗β(v − Sᵀk); o = Sᵀq;
//	           y = Wout (rmsnorm(o_h)·ssm_norm ⊙ silu(z_h)), z = Wgate n
//	MoE:       p = softmax(Wrouter n); top-k, renormalised; y = Σ w_e down_e(silu(gate_e n)⊙up_e n)
//	           + sigmoid(w_shexp·n) · down_s(silu(gate_s n) ⊙ up_s n)
//
// Multi-token-prediction tensors (blk.N.nextn.*) are not used.
func init() { Register("qwen35moe", buildQwen35MoE) }

// MoEConfig holds the expert and recurrent-layer hyper-parameters of hybrid MoE models.
type MoEConfig struct {
	Experts, Used    int
	NFFExp, NFFShare int
	FullAttnInterval int
	SSMConv          int // conv kernel
	SSMState         int // head size d (keys and values)
	SSMGroups        int // key/query heads
	SSMHeads         int // value heads
	SSMInner         int
	RopeSections     [4]int
}

func readQwen35MoE(f *gguf.File) (Config, error) {
	const arch = "qwen35moe"
	c, err := readCommon(f, arch)
	if err != nil {
		return c, err
	}
	m := meta{f, arch}
	x := &c.MoE
	for _, k := range []struct {
		dst *int
		key string
	}{
		{&x.Experts, "expert_count"}, {&x.Used, "expert_used_count"}, {&x.NFFExp, "expert_feed_forward_length"},
		{&x.NFFShare, "expert_shared_feed_forward_length"}, {&x.SSMConv, "ssm.conv_kernel"}, {&x.SSMState, "ssm.state_size"},
		{&x.SSMGroups, "ssm.group_count"}, {&x.SSMHeads, "ssm.time_step_rank"}, {&x.SSMInner, "ssm.inner_size"},
	} {
		if *k.dst, err = m.int(k.key); err != nil {
			return c, err
		}
	}
	// feed_forward_length is unused when the expert lengths are given; kept for reporting
	if c.NFF, err = m.intOr("feed_forward_length", x.NFFExp); err != nil {
		return c, err
	}
	if x.FullAttnInterval, err = m.intOr("full_attention_interval", 4); err != nil {
		return c, err
	}
	if f.Has(m.key("attention.recurrent_layers")) {
		return c, fmt.Errorf("model: %s is not supported (layer types from full_attention_interval only)", m.key("attention.recurrent_layers"))
	}
	switch {
	case x.Used > x.Experts:
		return c, fmt.Errorf("model: expert_used_count %d exceeds expert_count %d", x.Used, x.Experts)
	case x.SSMInner != x.SSMHeads*x.SSMState:
		return c, fmt.Errorf("model: ssm.inner_size %d != ssm.time_step_rank %d × ssm.state_size %d", x.SSMInner, x.SSMHeads, x.SSMState)
	case x.SSMHeads%x.SSMGroups != 0:
		return c, fmt.Errorf("model: %d value heads are not a multiple of %d key heads", x.SSMHeads, x.SSMGroups)
	case x.SSMConv < 2:
		return c, fmt.Errorf("model: ssm.conv_kernel %d must be at least 2", x.SSMConv)
	}
	secs, err := f.Ints(m.key("rope.dimension_sections"))
	if err != nil {
		return c, fmt.Errorf("model: %w", err)
	}
	if len(secs) > 4 {
		return c, fmt.Errorf("model: %s has %d entries, want at most 4", m.key("rope.dimension_sections"), len(secs))
	}
	sum := 0
	for i, v := range secs {
		if v < 0 || v > int64(c.NRot) {
			return c, fmt.Errorf("model: %s[%d] = %d is out of range", m.key("rope.dimension_sections"), i, v)
		}
		x.RopeSections[i] = int(v)
		sum += int(v)
	}
	if sum > c.NRot/2 {
		return c, fmt.Errorf("model: rope sections sum to %d, more than the %d rotated pairs", sum, c.NRot/2)
	}
	c.RopeMode = kernels.RopeNeox
	return c, nil
}

func buildQwen35MoE(f *gguf.File) (*Program, error) {
	c, err := readQwen35MoE(f)
	if err != nil {
		return nil, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) < 2 {
		return nil, fmt.Errorf("model: tensor %q is missing or not a matrix", "token_embd.weight")
	}
	c.NVocab = int(emb.Dims[1])
	_, hasOut := f.Tensor("output.weight")
	c.Tied = !hasOut
	x := c.MoE
	b := newBuilder(f, c)
	E := int64(c.NEmbd)
	NE, FFE, FFS := int64(x.Experts), int64(x.NFFExp), int64(x.NFFShare)
	g := GDNShape{K: x.SSMConv, NK: x.SSMGroups, NV: x.SSMHeads, D: x.SSMState, Inner: x.SSMInner}
	g.C = 2*g.NK*g.D + g.NV*g.D
	g.ConvSize, g.SSMSize = (g.K-1)*g.C, g.NV*g.D*g.D
	b.p.GDN = g
	b.p.Used = x.Used
	b.p.StateSrc = b.buf("state.src", I32Buf, 1, "step")
	b.p.StateDst = b.buf("state.dst", I32Buf, 1, "step")

	tokEmb, err := b.tensor("token_embd.weight", E, int64(c.NVocab))
	if err != nil {
		return nil, err
	}
	tab := b.ropeTable(c.NRot, c.RopeBase, c.RopeScale, c.RopeAttn, nil, x.RopeSections)

	xb := b.f32("x", c.NEmbd)
	b.embed(xb, tokEmb)
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d", l)
		w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
		attnNorm, err := w("attn_norm", E)
		if err != nil {
			return nil, err
		}
		n := b.rmsnorm(p+".attn_norm", xb, attnNorm, c.Eps)
		var mixed Buf
		if (l+1)%x.FullAttnInterval == 0 {
			if mixed, err = b.gatedAttention(p, n, c, tab); err != nil {
				return nil, err
			}
		} else {
			if mixed, err = b.gatedDeltaNet(p, n, c, g); err != nil {
				return nil, err
			}
		}
		b.add(p+".attn_residual", xb, mixed)

		postNorm, err := w("post_attention_norm", E)
		if err != nil {
			return nil, err
		}
		h := b.rmsnorm(p+".post_attention_norm", xb, postNorm, c.Eps)
		router, err := w("ffn_gate_inp", E, NE)
		if err != nil {
			return nil, err
		}
		if router.Type != dtype.F32 {
			return nil, fmt.Errorf("model: tensor %q is %s; the router must be f32", router.Name, router.Type)
		}
		gateExps, err := w("ffn_gate_exps", E, FFE, NE)
		if err != nil {
			return nil, err
		}
		upExps, err := w("ffn_up_exps", E, FFE, NE)
		if err != nil {
			return nil, err
		}
		downExps, err := w("ffn_down_exps", FFE, E, NE)
		if err != nil {
			return nil, err
		}
		shGate, err := w("ffn_gate_inp_shexp", E)
		if err != nil {
			return nil, err
		}
		gs, err := w("ffn_gate_shexp", E, FFS)
		if err != nil {
			return nil, err
		}
		us, err := w("ffn_up_shexp", E, FFS)
		if err != nil {
			return nil, err
		}
		ds, err := w("ffn_down_shexp", FFS, E)
		if err != nil {
			return nil, err
		}
		logits := b.matvec(p+".ffn_router", h, router)
		ids, weights := b.route(p, logits, x.Experts, x.Used)
		sg := b.matvec(p+".ffn_gate_shexp", h, gs)
		su := b.matvec(p+".ffn_up_shexp", h, us)
		b.swiglu(p+".ffn_swiglu_shexp", sg, su)
		sd := b.matvec(p+".ffn_down_shexp", sg, ds)
		gate := b.matvec(p+".ffn_gate_inp_shexp", h, shGate)
		act := b.expertsGateUp(p, h, ids, gateExps, upExps)
		moe := b.moeDown(p+".ffn_moe", act, ids, weights, sd, gate, downExps)
		b.add(p+".ffn_residual", xb, moe)
	}
	outNorm, err := b.tensor("output_norm.weight", E)
	if err != nil {
		return nil, err
	}
	head := tokEmb
	if !c.Tied {
		if head, err = b.tensor("output.weight", E, int64(c.NVocab)); err != nil {
			return nil, err
		}
	}
	b.head(xb, outNorm, head, c.Eps)
	return b.finish()
}

// gatedAttention emits a full-attention mixer: q|gate projection, per-head norms, partial
// rope, attention, sigmoid output gate, output projection.
func (b *builder) gatedAttention(p string, n Buf, c Config, tab RopeTable) (Buf, error) {
	E, H, D, HKV := int64(c.NEmbd), int64(c.NHead), int64(c.HeadDim), int64(c.NHeadKV)
	w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
	wq, err := w("attn_q", E, 2*H*D)
	if err != nil {
		return 0, err
	}
	wk, err := w("attn_k", E, HKV*D)
	if err != nil {
		return 0, err
	}
	wv, err := w("attn_v", E, HKV*D)
	if err != nil {
		return 0, err
	}
	wo, err := w("attn_output", H*D, E)
	if err != nil {
		return 0, err
	}
	qn, err := w("attn_q_norm", D)
	if err != nil {
		return 0, err
	}
	kn, err := w("attn_k_norm", D)
	if err != nil {
		return 0, err
	}
	qg := b.matvec(p+".attn_q", n, wq)
	k := b.matvec(p+".attn_k", n, wk)
	v := b.matvec(p+".attn_v", n, wv)
	q := b.f32(p+".attn_q_split", c.NHead*c.HeadDim)
	gate := b.f32(p+".attn_gate", c.NHead*c.HeadDim)
	b.emit(Op{Kind: OpSplitGate, Name: p + ".attn_q_split", In: []Buf{qg}, Out: q, Out2: gate, Heads: c.NHead, HeadDim: c.HeadDim,
		BytesPerRow: 16 * H * D})
	b.rmsnormInPlace(p+".attn_q_norm", q, qn, c.Eps)
	b.rmsnormInPlace(p+".attn_k_norm", k, kn, c.Eps)
	b.rope(p+".rope_q", q, c.NHead, c.HeadDim, tab, c.RopeMode)
	b.rope(p+".rope_k", k, c.NHeadKV, c.HeadDim, tab, c.RopeMode)
	a := b.attention(p, q, k, v, c)
	b.emit(Op{Kind: OpSigmoidMul, Name: p + ".attn_gated", In: []Buf{a, gate}, Out: a, BytesPerRow: 12 * H * D, FlopsPerRow: 20 * H * D})
	return b.matvec(p+".attn_output", a, wo), nil
}

// gatedDeltaNet emits a recurrent mixer.
func (b *builder) gatedDeltaNet(p string, n Buf, c Config, g GDNShape) (Buf, error) {
	E, C, NV, D := int64(c.NEmbd), int64(g.C), int64(g.NV), int64(g.D)
	w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
	wqkv, err := w("attn_qkv", E, C)
	if err != nil {
		return 0, err
	}
	wz, err := w("attn_gate", E, NV*D)
	if err != nil {
		return 0, err
	}
	wbeta, err := w("ssm_beta", E, NV)
	if err != nil {
		return 0, err
	}
	walpha, err := w("ssm_alpha", E, NV)
	if err != nil {
		return 0, err
	}
	conv, err := w("ssm_conv1d", int64(g.K), C)
	if err != nil {
		return 0, err
	}
	if conv.Type != dtype.F32 {
		return 0, fmt.Errorf("model: tensor %q is %s; conv taps must be f32", conv.Name, conv.Type)
	}
	ssmA, err := b.tensor(p+".ssm_a", NV)
	if err != nil {
		return 0, err
	}
	dt, err := b.tensor(p+".ssm_dt.bias", NV)
	if err != nil {
		return 0, err
	}
	norm, err := w("ssm_norm", D)
	if err != nil {
		return 0, err
	}
	wout, err := w("ssm_out", NV*D, E)
	if err != nil {
		return 0, err
	}
	layer := b.p.StateLayers
	b.p.StateLayers++
	qkv := b.matvec(p+".attn_qkv", n, wqkv)
	z := b.matvec(p+".attn_gate", n, wz)
	beta := b.matvec(p+".ssm_beta", n, wbeta)
	alpha := b.matvec(p+".ssm_alpha", n, walpha)
	cv := b.f32(p+".ssm_conv", g.C)
	b.emit(Op{Kind: OpGDNConv, Name: p + ".ssm_conv", In: []Buf{qkv}, Out: cv, Weight: conv.Name, Layer: layer, GDN: g,
		WeightBytes: int64(len(conv.Data)), BytesPerRow: 8*C + 8*int64(g.ConvSize), FlopsPerRow: 2 * C * int64(g.K)})
	o := b.f32(p+".ssm_scan", g.Inner)
	b.emit(Op{Kind: OpGDNScan, Name: p + ".ssm_scan", In: []Buf{cv, beta, alpha}, Out: o, Weight: ssmA.Name, Weight2: dt.Name,
		Layer: layer, GDN: g, Eps: c.Eps, BytesPerRow: 4*C + 4*NV*D + 8*int64(g.SSMSize), FlopsPerRow: 8 * int64(g.SSMSize)})
	gn := b.f32(p+".ssm_gated_norm", g.Inner)
	b.emit(Op{Kind: OpGatedNorm, Name: p + ".ssm_gated_norm", In: []Buf{o, z}, Out: gn, Weight: norm.Name, Heads: g.NV, HeadDim: g.D,
		Eps: c.Eps, WeightBytes: int64(len(norm.Data)), BytesPerRow: 12 * NV * D, FlopsPerRow: 24 * NV * D})
	return b.matvec(p+".ssm_out", gn, wout), nil
}

// route emits the router: softmax over the logits, top-k, renormalised weights.
func (b *builder) route(p string, logits Buf, experts, used int) (ids, weights Buf) {
	ids = b.buf(p+".ffn_expert_ids", I32Buf, used, "step")
	weights = b.f32(p+".ffn_expert_weights", used)
	b.emit(Op{Kind: OpRouter, Name: p + ".ffn_route", In: []Buf{logits}, Out: ids, Out2: weights, Experts: experts, Used: used,
		BytesPerRow: int64(4*experts + 8*used), FlopsPerRow: int64(20 * experts)})
	return ids, weights
}

// actInput returns in converted to act (emitting the conversion once per buffer and format),
// or in itself for float32 activations.
func (b *builder) actInput(in Buf, act kernels.Act, cols int) Buf {
	if act == kernels.ActF32 {
		return in
	}
	k := convKey{in, act}
	if conv, ok := b.conv[k]; ok {
		return conv
	}
	cname := b.p.Buffers[in].Name + "." + act.String()
	conv := b.buf(cname, ActBuf, cols, b.p.Buffers[in].Rows)
	b.p.Buffers[conv].Act = act
	b.emit(Op{Kind: OpConvert, Name: cname, In: []Buf{in}, Out: conv,
		BytesPerRow: 4*int64(cols) + int64(act.RowBytes(cols)), FlopsPerRow: 3 * int64(cols)})
	b.conv[k] = conv
	return conv
}

// moeMatVec emits the selected experts' products: per token input (gate, up) or per slot (down).
func (b *builder) moeMatVec(name string, in, ids Buf, w *Tensor, perSlot bool) Buf {
	f, _ := kernels.Lookup(w.Type)
	cols, rows, experts := int(w.Dims[0]), int(w.Dims[1]), int(w.Dims[2])
	used := b.p.Used
	src := b.actInput(in, f.Act, cols)
	out := b.buf(name, F32Buf, rows, "moe")
	expertBytes := int64(len(w.Data)) / int64(experts)
	inRows := int64(1)
	if perSlot {
		inRows = int64(used)
	}
	b.emit(Op{Kind: OpMoEMatVec, Name: name, In: []Buf{src, ids}, Out: out, Weight: w.Name, Rows: rows, Cols: cols,
		Experts: experts, Used: used, PerSlot: perSlot,
		// per row: Used experts' matrices (an upper bound: rows of a step may share experts)
		BytesPerRow: int64(used)*expertBytes + inRows*int64(f.Act.RowBytes(cols)) + 4*int64(used*rows),
		FlopsPerRow: 2 * int64(used) * int64(rows) * int64(cols)})
	return out
}

// expertsGateUp emits SwiGLU(gate, up) of the routed experts: the grouped kernel, or where
// gate and up differ in type two expert matvecs and SwiGLU.
func (b *builder) expertsGateUp(p string, h, ids Buf, gate, up *Tensor) Buf {
	if gate.Type == up.Type {
		return b.moeGateUp(p+".ffn_gate_up_exps", h, ids, gate, up)
	}
	act := b.moeMatVec(p+".ffn_gate_exps", h, ids, gate, false)
	ue := b.moeMatVec(p+".ffn_up_exps", h, ids, up, false)
	b.swiglu(p+".ffn_swiglu_exps", act, ue)
	return act
}

// moeGateUp emits the grouped gate/up/SwiGLU of the selected experts (gate and up of one type).
func (b *builder) moeGateUp(name string, in, ids Buf, gate, up *Tensor) Buf {
	f, _ := kernels.Lookup(gate.Type)
	cols, rows, experts := int(gate.Dims[0]), int(gate.Dims[1]), int(gate.Dims[2])
	used := b.p.Used
	src := b.actInput(in, f.Act, cols)
	out := b.buf(name, F32Buf, rows, "moe")
	expertBytes := int64(len(gate.Data)+len(up.Data)) / int64(experts)
	b.emit(Op{Kind: OpMoEGateUp, Name: name, In: []Buf{src, ids}, Out: out, Weight: gate.Name, Weight2: up.Name,
		Rows: rows, Cols: cols, Experts: experts, Used: used,
		BytesPerRow: int64(used)*expertBytes + int64(f.Act.RowBytes(cols)) + 4*int64(used*rows),
		FlopsPerRow: 4*int64(used)*int64(rows)*int64(cols) + 20*int64(used*rows)})
	return out
}

// moeDown emits the grouped down projection of the per-slot activations in, weighted by the
// router's weights, plus the sigmoid-gated shared expert unless shared (and gate) are noBuf.
func (b *builder) moeDown(name string, in, ids, weights, shared, gate Buf, w *Tensor) Buf {
	f, _ := kernels.Lookup(w.Type)
	cols, rows, experts := int(w.Dims[0]), int(w.Dims[1]), int(w.Dims[2])
	used := b.p.Used
	src := b.actInput(in, f.Act, cols)
	out := b.f32(name, rows)
	expertBytes := int64(len(w.Data)) / int64(experts)
	ins := []Buf{src, ids, weights, shared, gate}
	sharedBytes := int64(4 * 2 * rows) // reading the shared expert's row and writing the output
	if shared == noBuf || gate == noBuf {
		ins, sharedBytes = ins[:3], int64(4*rows)
	}
	b.emit(Op{Kind: OpMoEDown, Name: name, In: ins, Out: out, Weight: w.Name,
		Rows: rows, Cols: cols, Experts: experts, Used: used,
		BytesPerRow: int64(used)*(expertBytes+int64(f.Act.RowBytes(cols))) + 4*int64(used) + sharedBytes,
		FlopsPerRow: 2*int64(used)*int64(rows)*int64(cols) + 4*int64(rows)})
	return out
}
