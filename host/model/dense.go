package model

import (
	"fmt"

	"verity/host/gguf"
)

// denseOptions are the differences between the dense decoder-only transformers.
type denseOptions struct {
	ropeMode int32 // kernels.RopeAdjacent (llama) or kernels.RopeNeox (qwen)
	qkNorm   bool  // per-head RMSNorm of q and k before RoPE (qwen3)
	// Projection biases (attn_{q,k,v,output}.bias), added after their matvecs: qkvBias
	// requires q, k and v's (qwen2); optionalBias takes any of the four a file has (llama; a
	// file with feed-forward biases, which llama.cpp also reads, is refused as unsupported).
	qkvBias, optionalBias bool
	// moe: every layer's feed-forward is a mixture of experts (qwen3moe), of
	// expert_feed_forward_length (default feed_forward_length / expert_used_count).
	moe bool
	// fused: q, k and v may come as one attn_qkv (rows q, then k, then v), and the gate and up
	// projections always come as one ffn_up (rows gate, then up) (phi3).
	fused bool
	// longRope: RoPE frequency divisors come as rope_factors_short (used) and
	// rope_factors_long (for contexts past the original one, refused: Config.MaxContext)
	// instead of rope_freqs (phi3).
	longRope bool
}

// buildDense compiles the pre-norm decoder every dense architecture shares:
//
//	x = token_embd[token]
//	per layer: h = rmsnorm(x)·attn_norm; q,k,v = Wq h [+ bq], Wk h [+ bk], Wv h [+ bv]; [q,k per-head rmsnorm];
//	           rope(q), rope(k); a = attention(q; K, V); x += Wo a;
//	           h = rmsnorm(x)·ffn_norm; x += Wdown (silu(Wgate h) ⊙ Wup h)
//	logits = Woutput rmsnorm(x)·output_norm     (Woutput = token_embd when output.weight is absent)
//
// With expert_count > 0 (Mixtral-style MoE, as llama.cpp reads a "llama" file with experts), and
// always for qwen3moe, the feed-forward is a mixture of experts without a shared expert: the
// router's softmax over
// ffn_gate_inp h, the top expert_used_count experts with their probabilities renormalised, and
// x += Σ_k w_k · Wdown_k (silu(Wgate_k h) ⊙ Wup_k h) over the 3-D ffn_{gate,up,down}_exps.
func buildDense(f *gguf.File, arch string, o denseOptions) (*Program, error) {
	c, err := readCommon(f, arch)
	if err != nil {
		return nil, err
	}
	c.RopeMode = o.ropeMode
	if c.NFF, err = (meta{f, arch}).int("feed_forward_length"); err != nil {
		return nil, err
	}
	if c.ValueDim != c.HeadDim {
		return nil, fmt.Errorf("model: value head size %d differs from key head size %d: not supported", c.ValueDim, c.HeadDim)
	}
	if err := readVocab(f, arch, &c); err != nil {
		return nil, err
	}
	_, hasOut := f.Tensor("output.weight")
	c.Tied = !hasOut
	m := meta{f, arch}
	if o.moe || arch == "llama" && f.Has(m.key("expert_count")) {
		n, err := f.Int(m.key("expert_count"))
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		if n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("model: key %q = %d is out of range", m.key("expert_count"), n)
		}
		c.MoE.Experts = int(n) // 0: dense, as llama.cpp reads it
		if o.moe && c.MoE.Experts == 0 {
			return nil, fmt.Errorf("model: %s needs %s ≥ 1", arch, m.key("expert_count"))
		}
	}
	if c.MoE.Experts > 0 {
		if c.MoE.Used, err = m.int("expert_used_count"); err != nil {
			return nil, err
		}
		if c.MoE.Used > c.MoE.Experts {
			return nil, fmt.Errorf("model: expert_used_count %d exceeds expert_count %d", c.MoE.Used, c.MoE.Experts)
		}
		if s, err := f.FloatOr(m.key("expert_weights_scale"), 0); err != nil || (s != 0 && s != 1) {
			if err != nil {
				return nil, fmt.Errorf("model: %w", err)
			}
			return nil, fmt.Errorf("model: %s = %v: scaled expert weights are not supported", m.key("expert_weights_scale"), s)
		}
		c.MoE.NFFExp = c.NFF
		if o.moe {
			n, err := f.IntOr(m.key("expert_feed_forward_length"), int64(c.NFF/max(c.MoE.Used, 1)))
			if err != nil {
				return nil, fmt.Errorf("model: %w", err)
			}
			if n < 1 || n > 1<<24 {
				return nil, fmt.Errorf("model: key %q = %d is out of range", m.key("expert_feed_forward_length"), n)
			}
			c.MoE.NFFExp = int(n)
		}
	}

	b := newBuilder(f, c)
	b.p.Used = c.MoE.Used
	E, H, HD, KV := int64(c.NEmbd), int64(c.NHead), int64(c.HeadDim), int64(c.NHeadKV)
	tokEmb, err := b.tensor("token_embd.weight", E, int64(c.NVocab))
	if err != nil {
		return nil, err
	}
	var freqs []float32
	freqsName := "rope_freqs.weight"
	if o.longRope {
		freqsName = "rope_factors_short.weight"
		if _, ok := f.Tensor("rope_factors_long.weight"); ok {
			if _, err := b.read("rope_factors_long.weight", int64(c.NRot/2)); err != nil { // checked, not used
				return nil, err
			}
			n, err := f.IntOr(m.key("rope.scaling.original_context_length"), int64(c.NCtx))
			if err != nil {
				return nil, fmt.Errorf("model: %w", err)
			}
			if n < 1 || n > int64(c.NCtx) {
				return nil, fmt.Errorf("model: key %q = %d: want 1 … the context length %d", m.key("rope.scaling.original_context_length"), n, c.NCtx)
			}
			c.MaxContext = int(n)
			b.p.Config.MaxContext = c.MaxContext
		}
	}
	if _, ok := f.Tensor(freqsName); ok {
		t, err := b.read(freqsName, int64(c.NRot/2)) // decoded into the RoPE table here
		if err != nil {
			return nil, err
		}
		freqs = decodeF32(t.Data)
	}
	tab := b.ropeTable(c.NRot, c.RopeBase, c.RopeScale, c.RopeAttn, freqs, [4]int{})

	x := b.f32("x", c.NEmbd)
	b.embed(x, tokEmb)
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d", l)
		w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
		attnNorm, err := w("attn_norm", E)
		if err != nil {
			return nil, err
		}
		var wq, wk, wv *Tensor
		if _, ok := f.Tensor(p + ".attn_qkv.weight"); ok && o.fused {
			qkv, err := b.split(p+".attn_qkv.weight", E, H*HD, KV*HD, KV*HD)
			if err != nil {
				return nil, err
			}
			wq, wk, wv = qkv[0], qkv[1], qkv[2]
		} else {
			if wq, err = w("attn_q", E, H*HD); err != nil {
				return nil, err
			}
			if wk, err = w("attn_k", E, KV*HD); err != nil {
				return nil, err
			}
			if wv, err = w("attn_v", E, KV*HD); err != nil {
				return nil, err
			}
		}
		wo, err := w("attn_output", H*HD, E)
		if err != nil {
			return nil, err
		}
		ffnNorm, err := w("ffn_norm", E)
		if err != nil {
			return nil, err
		}
		ffn := b.denseFFN
		switch {
		case c.MoE.Experts > 0:
			ffn = b.expertFFN
		case o.fused:
			ffn = b.fusedFFN
		}
		// addBias adds proj's bias to out where the architecture has one
		addBias := func(proj string, out Buf, width int64, required bool) error {
			name := p + "." + proj + ".bias"
			if _, ok := f.Tensor(name); !ok && !required {
				return nil
			}
			t, err := b.tensor(name, width)
			if err != nil {
				return err
			}
			return b.bias(name, out, t)
		}
		h := b.rmsnorm(p+".attn_norm", x, attnNorm, c.Eps)
		q := b.matvec(p+".attn_q", h, wq)
		k := b.matvec(p+".attn_k", h, wk)
		v := b.matvec(p+".attn_v", h, wv)
		if o.qkvBias || o.optionalBias {
			for _, pb := range []struct {
				proj  string
				out   Buf
				width int64
			}{{"attn_q", q, H * HD}, {"attn_k", k, KV * HD}, {"attn_v", v, KV * HD}} {
				if err := addBias(pb.proj, pb.out, pb.width, o.qkvBias); err != nil {
					return nil, err
				}
			}
		}
		if o.qkNorm {
			qn, err := w("attn_q_norm", HD)
			if err != nil {
				return nil, err
			}
			kn, err := w("attn_k_norm", HD)
			if err != nil {
				return nil, err
			}
			b.rmsnormInPlace(p+".attn_q_norm", q, qn, c.Eps)
			b.rmsnormInPlace(p+".attn_k_norm", k, kn, c.Eps)
		}
		b.rope(p+".rope_q", q, c.NHead, c.HeadDim, tab, c.RopeMode)
		b.rope(p+".rope_k", k, c.NHeadKV, c.HeadDim, tab, c.RopeMode)
		a := b.attention(p, q, k, v, c)
		ao := b.matvec(p+".attn_output", a, wo)
		if o.optionalBias {
			if err := addBias("attn_output", ao, E, false); err != nil {
				return nil, err
			}
		}
		b.add(p+".attn_residual", x, ao)

		h = b.rmsnorm(p+".ffn_norm", x, ffnNorm, c.Eps)
		d, err := ffn(p, h, c)
		if err != nil {
			return nil, err
		}
		b.add(p+".ffn_residual", x, d)
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
	b.head(x, outNorm, head, c.Eps)
	return b.finish()
}

// readVocab sets c.NVocab from token_embd's rows, checking vocab_size where the file has it.
func readVocab(f *gguf.File, arch string, c *Config) error {
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return fmt.Errorf("model: tensor %q is missing", "token_embd.weight")
	}
	if len(emb.Dims) < 2 {
		return fmt.Errorf("model: tensor %q has dims %v, want [%d, n_vocab]", "token_embd.weight", emb.Dims, c.NEmbd)
	}
	c.NVocab = int(emb.Dims[1])
	if v, err := f.IntOr(arch+".vocab_size", int64(c.NVocab)); err != nil || v != int64(c.NVocab) {
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		return fmt.Errorf("model: %s.vocab_size = %d but token_embd has %d rows", arch, v, c.NVocab)
	}
	return nil
}

// denseFFN emits Wdown (silu(Wgate h) ⊙ Wup h).
func (b *builder) denseFFN(p string, h Buf, c Config) (Buf, error) {
	E, FF := int64(c.NEmbd), int64(c.NFF)
	wg, err := b.tensor(p+".ffn_gate.weight", E, FF)
	if err != nil {
		return 0, err
	}
	wu, err := b.tensor(p+".ffn_up.weight", E, FF)
	if err != nil {
		return 0, err
	}
	wd, err := b.tensor(p+".ffn_down.weight", FF, E)
	if err != nil {
		return 0, err
	}
	g := b.matvec(p+".ffn_gate", h, wg)
	u := b.matvec(p+".ffn_up", h, wu)
	b.swiglu(p+".ffn_swiglu", g, u)
	return b.matvec(p+".ffn_down", g, wd), nil
}

// fusedFFN is denseFFN with the gate and up projections fused into ffn_up (gate rows first).
func (b *builder) fusedFFN(p string, h Buf, c Config) (Buf, error) {
	E, FF := int64(c.NEmbd), int64(c.NFF)
	gu, err := b.split(p+".ffn_up.weight", E, FF, FF)
	if err != nil {
		return 0, err
	}
	wd, err := b.tensor(p+".ffn_down.weight", FF, E)
	if err != nil {
		return 0, err
	}
	g := b.matvec(p+".ffn_gate", h, gu[0])
	u := b.matvec(p+".ffn_up", h, gu[1])
	b.swiglu(p+".ffn_swiglu", g, u)
	return b.matvec(p+".ffn_down", g, wd), nil
}

// expertFFN emits the mixture of experts without a shared expert (see buildDense).
func (b *builder) expertFFN(p string, h Buf, c Config) (Buf, error) {
	E, FF, NE := int64(c.NEmbd), int64(c.MoE.NFFExp), int64(c.MoE.Experts)
	w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
	router, err := w("ffn_gate_inp", E, NE)
	if err != nil {
		return 0, err
	}
	gateExps, err := w("ffn_gate_exps", E, FF, NE)
	if err != nil {
		return 0, err
	}
	upExps, err := w("ffn_up_exps", E, FF, NE)
	if err != nil {
		return 0, err
	}
	downExps, err := w("ffn_down_exps", FF, E, NE)
	if err != nil {
		return 0, err
	}
	logits := b.matvec(p+".ffn_router", h, router)
	ids, weights := b.route(p, logits, c.MoE.Experts, c.MoE.Used)
	act := b.expertsGateUp(p, h, ids, gateExps, upExps)
	return b.moeDown(p+".ffn_moe", act, ids, weights, noBuf, noBuf, downExps), nil
}
