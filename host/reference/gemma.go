package reference

import (
	"fmt"
	"math"

	"verity/device/num"
)

// # Gemma (gemma, gemma2, gemma3)
//
// As llama.cpp reads these files (src/models/gemma.cpp, gemma2.cpp, gemma3.cpp), with rmsnorm,
// eps, RoPE (NEOX pairs) and GQA as above:
//
//	x = token_embd[token] · float32(√E)
//	per layer:
//	  n = rmsnorm(x)·attn_norm
//	  q, k, v = Wq·n, Wk·n, Wv·n
//	  gemma3: q_h = rmsnorm(q_h)·attn_q_norm, k_j = rmsnorm(k_j)·attn_k_norm   (per head, before RoPE)
//	  s = q_h·k_{j,s}·scale; gemma2: s = c_a·tanh(s/c_a)
//	  a_h = Σ_s softmax_s(s) v_{j,s}, s over every position up to pos, or on a local layer the
//	        last W of them (p − W < s ≤ pos)
//	  o = Wo·a; gemma2, gemma3: o = rmsnorm(o)·post_attention_norm;  x = x + o
//	  n = rmsnorm(x)·ffn_norm
//	  f = Wdown·(gelu(Wgate·n) ⊙ Wup·n); gemma2, gemma3: f = rmsnorm(f)·post_ffw_norm;  x = x + f
//	logits = Woutput·(rmsnorm(x)·output_norm); with a final soft cap c_f: c_f·tanh(logits/c_f)
//
// gelu(g) = g/2·(1 + tanh(√(2/π)·(g + 0.044715·g³))). Norm weights are used as stored (the
// converter writes Gemma's 1 + w). scale = 1/√D, or 1/√(E/H) for the 27B shapes (gemma2 of 46
// blocks, gemma3 of 62), as llama.cpp sets it. W = attention.sliding_window (gemma2: default
// 4096; gemma3: none without the key); layer i is local iff i mod P < P − 1 with P =
// attention.sliding_window_pattern (default 2 for gemma2, 6 for gemma3). Local layers rotate
// with rope.freq_base_swa (default 10000 for gemma3, rope.freq_base for gemma2) and, for
// gemma3, no linear scaling. gemma2's soft caps: attn_logit_softcapping (default 50) and
// final_logit_softcapping (default 30); gemma3's final cap only when the key is present.

// readGemma reads the Gemma families' keys into c.
func readGemma(m meta, c *Config) error {
	c.Gemma = true
	c.PostNorms = m.arch != "gemma"
	c.EmbedScale = float64(float32(math.Sqrt(float64(c.NEmbd))))
	if big := map[string]int{"gemma2": 46, "gemma3": 62}[m.arch]; big != 0 && c.NLayer == big {
		c.AttnScale = 1 / math.Sqrt(float64(c.NEmbd/c.NHead))
	}
	c.LocalBase, c.LocalScale = 10000, 1
	period := 6
	var err error
	switch m.arch {
	case "gemma2":
		if c.Window, err = m.count("attention.sliding_window", 4096); err != nil {
			return err
		}
		period = 2
		c.LocalBase, c.LocalScale = c.RopeBase, c.RopeScale
		if c.AttnSoftCap, err = m.number("attn_logit_softcapping", 50); err != nil {
			return err
		}
		if c.FinalSoftCap, err = m.number("final_logit_softcapping", 30); err != nil {
			return err
		}
	case "gemma3":
		if c.Window, err = m.count("attention.sliding_window", 0); err != nil {
			return err
		}
		if c.FinalSoftCap, err = m.number("final_logit_softcapping", 0); err != nil {
			return err
		}
	}
	if c.AttnSoftCap < 0 || c.FinalSoftCap < 0 {
		return fmt.Errorf("reference: soft caps %g, %g must not be negative", c.AttnSoftCap, c.FinalSoftCap)
	}
	if c.Window == 0 {
		return nil
	}
	if period, err = m.count("attention.sliding_window_pattern", period); err != nil {
		return err
	}
	if period < 1 {
		return fmt.Errorf("reference: key %q = %d is out of range", m.key("attention.sliding_window_pattern"), period)
	}
	if c.LocalBase, err = m.number("rope.freq_base_swa", c.LocalBase); err != nil {
		return err
	}
	c.Local = make([]bool, c.NLayer)
	for i := range c.Local {
		c.Local[i] = i%period < period-1
	}
	return nil
}

// gemmaLayer loads what a Gemma layer has beyond the dense ones (its sandwich norms) and sets
// its window and RoPE.
func (l *loader) gemmaLayer(ly *layer, c Config, i int) error {
	p := fmt.Sprintf("blk.%d.", i)
	ly.ropeBase, ly.ropeScale = c.RopeBase, c.RopeScale
	if c.Local != nil && c.Local[i] {
		ly.window = c.Window
		ly.ropeBase, ly.ropeScale = c.LocalBase, c.LocalScale
	}
	if !c.PostNorms {
		return nil
	}
	var err error
	if ly.attnPostNorm, err = l.vector(p+"post_attention_norm.weight", c.NEmbd); err != nil {
		return err
	}
	ly.ffnPostNorm, err = l.vector(p+"post_ffw_norm.weight", c.NEmbd)
	return err
}

// geglu returns down·(gelu(gate·n) ⊙ up·n).
func (m *Model) geglu(gate, up, down *matrix, n []float64) []float64 {
	aq := m.opt.ActQuant
	g, u := gate.mul(n, aq), up.mul(n, aq)
	for i := range g {
		g[i] = m.gelu(g[i]) * u[i]
	}
	return down.mul(g, aq)
}

// gelu is the tanh form of GELU; with Options.GELUF16, ggml's CPU form: the argument and the
// result rounded to float16 (its 65536-entry table), 0 at or below −10 and g at or above 10.
func (m *Model) gelu(g float64) float64 {
	if !m.opt.GELUF16 {
		return geluTanh(g)
	}
	switch {
	case g <= -10:
		return 0
	case g >= 10:
		return g
	}
	h := float64(num.F16ToF32(num.F32ToF16(float32(g))))
	return float64(num.F16ToF32(num.F32ToF16(float32(geluTanh(h)))))
}

func geluTanh(g float64) float64 {
	return 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
}

// logits returns the head's output for the last layer's x, soft-capped where the model is.
func (m *Model) logits(x []float64) []float64 {
	out := m.output.mul(rmsNorm(x, m.outNorm, m.cfg.Eps), m.opt.ActQuant)
	if c := m.cfg.FinalSoftCap; c > 0 {
		for i, v := range out {
			out[i] = c * math.Tanh(v/c)
		}
	}
	return out
}
