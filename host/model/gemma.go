package model

import (
	"fmt"
	"math"

	"verity/device/kernels"
	"verity/host/gguf"
)

// gemma, gemma2, gemma3: Google's Gemma families, as llama.cpp reads their files
// (src/models/gemma.cpp, gemma2.cpp, gemma3.cpp):
//
//	x = token_embd[token] · float32(√n_embd)
//	per layer: h = rmsnorm(x)·attn_norm; q, k, v = Wq h, Wk h, Wv h;
//	           [gemma3: q, k per-head rmsnorm · attn_q_norm, attn_k_norm]; NEOX rope(q), rope(k);
//	           a = attention(q; K, V) with scores q·k·scale [gemma2: soft-capped],
//	               over the layer's window of keys on a sliding-window layer;
//	           o = Wo a; [gemma2, gemma3: o = rmsnorm(o)·post_attention_norm]; x += o;
//	           h = rmsnorm(x)·ffn_norm; f = Wdown (gelu(Wgate h) ⊙ Wup h);
//	           [gemma2, gemma3: f = rmsnorm(f)·post_ffw_norm]; x += f
//	logits = Woutput rmsnorm(x)·output_norm     (Woutput = token_embd; gemma3 may have output.weight)
//	[gemma2, and gemma3 with final_logit_softcapping: logits = c·tanh(logits/c)]
//
// Norm weights are used as the file holds them: Gemma's checkpoints scale by (1 + w), and
// llama.cpp's converter writes w + 1, so every norm here is the plain rmsnorm(x)·w. gelu is the
// tanh form (num.GELU32). Soft-capping is Tanh32(x·float32(1/c))·c, each step rounded, as
// llama.cpp's scale–tanh–scale. The attention scale is llama.cpp's: 1/√key_length, or
// 1/√(n_embd/n_head) for the 27B shapes (gemma2 with 46 layers, gemma3 with 62); it reads no
// query_pre_attn_scalar key, the checkpoints' value being one of these two.
//
// Sliding windows (gemma2: attention.sliding_window, default 4096; gemma3: when the key is
// present and positive): layer i is local when i % P < P−1 for the period P =
// attention.sliding_window_pattern (gemma2 2, gemma3 6: layers 0, 2, … and five of every six),
// else global. A local layer's query at position p sees the keys at p−W+1 … p: the last W of its
// key list (kernels.AttentionArgs.Window), so verify == decode still holds bit for bit, a
// tree node's window being part of its own list. gemma3's local layers rotate with
// rope.freq_base_swa (default 10000) and no position scaling; gemma2's with rope.freq_base_swa,
// default rope.freq_base.
//
// The K/V cache keeps every position of every layer, local ones too: the cache is addressed by
// logical position through the session's page table, and a verify step's nodes, a rollback or
// a commit move page entries, never data — a ring of W slots would have to be rewritten on a
// rollback, and a tree whose nodes sit at different depths reads different windows of the
// same history. Bandwidth is what the window saves: an attention reads at most W keys a row
// (Op.KeysRead), while memory grows with the context as a global layer's does.
func init() {
	for _, v := range []gemmaVariant{
		{arch: "gemma"},
		{arch: "gemma2", postNorms: true, softCaps: true, defaultWindow: 4096, defaultPeriod: 2, swaBaseDefaultsToGlobal: true, tied: true},
		{arch: "gemma3", postNorms: true, qkNorm: true, defaultPeriod: 6},
	} {
		Register(v.arch, func(f *gguf.File) (*Program, error) { return buildGemma(f, v) })
	}
}

// gemmaVariant is what tells the Gemma families apart.
type gemmaVariant struct {
	arch      string
	postNorms bool // post_attention_norm and post_ffw_norm (sandwich norms)
	qkNorm    bool // per-head RMSNorm of q and k before RoPE
	softCaps  bool // attention and final logit soft-capping (attn_logit_softcapping 50, final 30 by default)
	// defaultWindow is the sliding window when the file has no attention.sliding_window (0: the
	// key turns sliding windows on, gemma3); defaultPeriod is the sliding_window_pattern's.
	defaultWindow, defaultPeriod int
	swaBaseDefaultsToGlobal      bool // the local layers' RoPE base defaults to rope.freq_base (else 10000)
	tied                         bool // the head is always token_embd (an output.weight is refused)
}

// gemmaLocal reports whether layer i is a sliding-window layer for sliding_window_pattern
// period (llama.cpp's set_swa_pattern).
func gemmaLocal(i, period int) bool { return i%period < period-1 }

func buildGemma(f *gguf.File, v gemmaVariant) (*Program, error) {
	arch := v.arch
	c, err := readCommon(f, arch)
	if err != nil {
		return nil, err
	}
	m := meta{f, arch}
	c.RopeMode = kernels.RopeNeox
	if c.NFF, err = m.int("feed_forward_length"); err != nil {
		return nil, err
	}
	if c.ValueDim != c.HeadDim {
		return nil, fmt.Errorf("model: value head size %d differs from key head size %d: not supported", c.ValueDim, c.HeadDim)
	}
	if c.NRot != c.HeadDim {
		return nil, fmt.Errorf("model: rope.dimension_count %d differs from the head size %d (llama.cpp requires them equal for %s)", c.NRot, c.HeadDim, arch)
	}
	if err := readVocab(f, arch, &c); err != nil {
		return nil, err
	}
	_, hasOut := f.Tensor("output.weight")
	if hasOut && (v.tied || arch == "gemma") {
		return nil, fmt.Errorf("model: %s has no output.weight (its head is token_embd)", arch)
	}
	c.Tied = !hasOut
	if big := map[string]int{"gemma2": 46, "gemma3": 62}[arch]; big != 0 && c.NLayer == big {
		c.AttnScale = float32(1 / math.Sqrt(float64(float32(c.NEmbd/c.NHead))))
	}

	window := 0
	if v.arch != "gemma" {
		if window, err = m.intOr("attention.sliding_window", v.defaultWindow); err != nil {
			return nil, err
		}
	}
	period := v.defaultPeriod
	if window > 0 {
		if period, err = m.intOr("attention.sliding_window_pattern", v.defaultPeriod); err != nil {
			return nil, err
		}
	}
	var attnCap, finalCap float64
	if v.softCaps {
		if attnCap, err = m.floatOr("attn_logit_softcapping", 50); err != nil {
			return nil, err
		}
		if finalCap, err = m.floatOr("final_logit_softcapping", 30); err != nil {
			return nil, err
		}
	} else if arch == "gemma3" {
		if finalCap, err = m.floatOr("final_logit_softcapping", 0); err != nil {
			return nil, err
		}
	}
	for _, sc := range []float64{attnCap, finalCap} {
		if sc < 0 || sc > math.MaxFloat32 || sc != 0 && float32(sc) == 0 {
			return nil, fmt.Errorf("model: soft cap %g is out of range", sc)
		}
	}
	localBase := 10000.0
	if v.swaBaseDefaultsToGlobal {
		localBase = c.RopeBase
	}
	if localBase, err = m.floatOr("rope.freq_base_swa", localBase); err != nil {
		return nil, err
	}
	if localBase <= 1 {
		return nil, fmt.Errorf("model: key %q = %g is out of range", m.key("rope.freq_base_swa"), localBase)
	}
	localScale := 1.0
	if v.swaBaseDefaultsToGlobal {
		localScale = c.RopeScale
	}

	b := newBuilder(f, c)
	E, H, HD, KV, FF := int64(c.NEmbd), int64(c.NHead), int64(c.HeadDim), int64(c.NHeadKV), int64(c.NFF)
	tokEmb, err := b.tensor("token_embd.weight", E, int64(c.NVocab))
	if err != nil {
		return nil, err
	}
	global := b.ropeTable(c.NRot, c.RopeBase, c.RopeScale, c.RopeAttn, nil, [4]int{})
	local := global
	if window > 0 {
		local = b.ropeTable(c.NRot, localBase, localScale, c.RopeAttn, nil, [4]int{})
	}

	x := b.f32("x", c.NEmbd)
	b.embed(x, tokEmb)
	b.scale("x.scaled", x, float32(math.Sqrt(float64(c.NEmbd))))
	for l := 0; l < c.NLayer; l++ {
		p := fmt.Sprintf("blk.%d", l)
		w := func(name string, dims ...int64) (*Tensor, error) { return b.tensor(p+"."+name+".weight", dims...) }
		var ws [7]*Tensor
		for i, t := range []struct {
			name string
			dims []int64
		}{{"attn_norm", []int64{E}}, {"attn_q", []int64{E, H * HD}}, {"attn_k", []int64{E, KV * HD}}, {"attn_v", []int64{E, KV * HD}},
			{"attn_output", []int64{H * HD, E}}, {"ffn_norm", []int64{E}}, {"ffn_gate", []int64{E, FF}}} {
			if ws[i], err = w(t.name, t.dims...); err != nil {
				return nil, err
			}
		}
		attnNorm, wq, wk, wv, wo, ffnNorm, wg := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
		wu, err := w("ffn_up", E, FF)
		if err != nil {
			return nil, err
		}
		wd, err := w("ffn_down", FF, E)
		if err != nil {
			return nil, err
		}
		var attnPost, ffnPost, qn, kn *Tensor
		if v.postNorms {
			if attnPost, err = w("post_attention_norm", E); err != nil {
				return nil, err
			}
			if ffnPost, err = w("post_ffw_norm", E); err != nil {
				return nil, err
			}
		}
		if v.qkNorm {
			if qn, err = w("attn_q_norm", HD); err != nil {
				return nil, err
			}
			if kn, err = w("attn_k_norm", HD); err != nil {
				return nil, err
			}
		}

		isLocal := window > 0 && gemmaLocal(l, period)
		tab, win := global, 0
		if isLocal {
			tab, win = local, window
		}
		h := b.rmsnorm(p+".attn_norm", x, attnNorm, c.Eps)
		q := b.matvec(p+".attn_q", h, wq)
		k := b.matvec(p+".attn_k", h, wk)
		vv := b.matvec(p+".attn_v", h, wv)
		if v.qkNorm {
			b.rmsnormInPlace(p+".attn_q_norm", q, qn, c.Eps)
			b.rmsnormInPlace(p+".attn_k_norm", k, kn, c.Eps)
		}
		b.rope(p+".rope_q", q, c.NHead, c.HeadDim, tab, c.RopeMode)
		b.rope(p+".rope_k", k, c.NHeadKV, c.HeadDim, tab, c.RopeMode)
		a := b.attentionWith(p, q, k, vv, c, c.AttnScale, win, float32(attnCap))
		ao := b.matvec(p+".attn_output", a, wo)
		if v.postNorms {
			b.rmsnormInPlace(p+".post_attention_norm", ao, attnPost, c.Eps)
		}
		b.add(p+".attn_residual", x, ao)

		h = b.rmsnorm(p+".ffn_norm", x, ffnNorm, c.Eps)
		g := b.matvec(p+".ffn_gate", h, wg)
		u := b.matvec(p+".ffn_up", h, wu)
		b.geglu(p+".ffn_geglu", g, u)
		d := b.matvec(p+".ffn_down", g, wd)
		if v.postNorms {
			b.rmsnormInPlace(p+".post_ffw_norm", d, ffnPost, c.Eps)
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
	if finalCap > 0 {
		b.softCap("logits.softcap", b.p.Logits, float32(finalCap))
	}
	return b.finish()
}
