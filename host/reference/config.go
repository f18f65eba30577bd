package reference

import (
	"errors"
	"fmt"
	"math"

	"verity/host/gguf"
)

// Config holds the hyper-parameters the forward pass uses, as read from the GGUF metadata.
type Config struct {
	Arch    string // general.architecture: "llama", "phi3", "qwen2", "qwen3", "qwen3moe" or "qwen35moe"
	NLayer  int    // layers the forward pass runs: block_count less nextn_predict_layers
	NEmbd   int    // embedding_length
	NFF     int    // feed_forward_length (optional for qwen35moe, 0 when absent)
	NHead   int    // attention.head_count
	NHeadKV int    // attention.head_count_kv (default NHead)
	HeadDim int    // attention.key_length (default NEmbd/NHead); also the value head size
	NVocab  int    // rows of token_embd.weight
	Eps     float64

	NRot        int     // rope.dimension_count: RoPE rotates the first NRot elements of a head
	RopeBase    float64 // rope.freq_base (default 10000)
	RopeScale   float64 // linear position scaling factor s: θ is divided by s; 1 = none
	RopeAttn    float64 // rope.scaling.attn_factor: multiplies cos θ and sin θ (default 1)
	RopeNeox    bool    // pairs (i, i+NRot/2) (qwen3, qwen35moe) rather than (2i, 2i+1) (llama)
	QKNorm      bool    // per-head RMSNorm of q and k before RoPE (qwen3, qwen35moe)
	RopeFactors bool    // rope_freqs.weight divides the frequencies (llama 3)
	Tied        bool    // no output.weight: the head is token_embd

	// qwen35moe only (zero otherwise).
	RopeSections [4]int // rope.dimension_sections: the IMROPE sections (t, h, w, e) of the pairs
	Recurrent    []bool // per layer: Gated DeltaNet (true) or gated full attention
	NExpert      int    // expert_count
	NExpertUsed  int    // expert_used_count: the experts each token is routed to
	NFFExp       int    // expert_feed_forward_length (default NFF/NExpertUsed)
	NFFShared    int    // expert_shared_feed_forward_length (default NFF)
	ConvKernel   int    // ssm.conv_kernel: taps of the causal depthwise convolution
	SSMHeadDim   int    // ssm.state_size: key and value head size of the Gated DeltaNet
	SSMKHeads    int    // ssm.group_count: query/key heads of the Gated DeltaNet
	SSMVHeads    int    // ssm.time_step_rank: value heads (each with its own state)
	NextN        int    // nextn_predict_layers: multi-token-prediction blocks after the trunk, unused

	// Gemma families only (zero otherwise); see gemma.go.
	Gemma        bool    // gemma, gemma2, gemma3: embeddings times EmbedScale, a GELU feed-forward
	PostNorms    bool    // post_attention_norm and post_ffw_norm (gemma2, gemma3)
	EmbedScale   float64 // float32(√NEmbd), as llama.cpp's sqrtf rounds it
	AttnScale    float64 // the attention scale when not 1/√HeadDim (0: 1/√HeadDim)
	AttnSoftCap  float64 // attn_logit_softcapping (gemma2; 0: none)
	FinalSoftCap float64 // final_logit_softcapping (gemma2, optional for gemma3; 0: none)
	Window       int     // attention.sliding_window of the local layers (0: none)
	Local        []bool  // per layer: a sliding-window layer
	LocalBase    float64 // rope.freq_base_swa: the local layers' RoPE base
	LocalScale   float64 // the local layers' linear RoPE scaling factor
}

// archTraits are what distinguishes the supported architectures. Projection biases: qkvBias
// requires attn_{q,k,v}.bias (qwen2), optionalBias reads any of attn_{q,k,v,output}.bias a
// file has (llama).
var archTraits = map[string]struct{ neox, qkNorm, ropeFactors, hybrid, qkvBias, optionalBias, moe, fused, longRope, gemma bool }{
	"llama": {neox: false, qkNorm: false, ropeFactors: true, optionalBias: true},
	"qwen2": {neox: true, qkvBias: true},
	// phi3: attn_qkv (or q, k, v) and ffn_up holding gate and up; rope_factors_short (the
	// factors for contexts up to the original one, the reference's) and rope_factors_long;
	// rotation of all or part of a head
	"phi3":      {neox: true, fused: true, longRope: true},
	"qwen3":     {neox: true, qkNorm: true, ropeFactors: false},
	"qwen3moe":  {neox: true, qkNorm: true, moe: true},
	"qwen35moe": {neox: true, qkNorm: true, hybrid: true},
	"gemma":     {neox: true, gemma: true},
	"gemma2":    {neox: true, gemma: true},
	"gemma3":    {neox: true, qkNorm: true, gemma: true},
}

// meta reads the keys of one architecture with errors that name the key.
type meta struct {
	f    *gguf.File
	arch string
}

func (m meta) key(k string) string { return m.arch + "." + k }

// count returns an integer key as a positive int; def < 0 means the key is required.
func (m meta) count(k string, def int) (int, error) {
	if !m.f.Has(m.key(k)) {
		if def < 0 {
			return 0, fmt.Errorf("reference: key %q is missing", m.key(k))
		}
		return def, nil
	}
	v, err := m.f.Int(m.key(k))
	if err != nil {
		return 0, fmt.Errorf("reference: %w", err)
	}
	if v <= 0 || v > 1<<24 {
		return 0, fmt.Errorf("reference: key %q = %d is out of range", m.key(k), v)
	}
	return int(v), nil
}

// natural returns an integer key that may be 0, or 0 when it is absent.
func (m meta) natural(k string) (int, error) {
	if !m.f.Has(m.key(k)) {
		return 0, nil
	}
	v, err := m.f.Int(m.key(k))
	if err != nil {
		return 0, fmt.Errorf("reference: %w", err)
	}
	if v < 0 || v > 1<<24 {
		return 0, fmt.Errorf("reference: key %q = %d is out of range", m.key(k), v)
	}
	return int(v), nil
}

// number returns a finite numeric key, or def when it is absent.
func (m meta) number(k string, def float64) (float64, error) {
	v, err := m.f.FloatOr(m.key(k), def)
	if err != nil {
		return 0, fmt.Errorf("reference: %w", err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("reference: key %q = %v is not finite", m.key(k), v)
	}
	return v, nil
}

// readConfig reads the hyper-parameters of f and checks them for the supported architectures.
func readConfig(f *gguf.File) (Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return Config{}, fmt.Errorf("reference: %w", err)
	}
	tr, ok := archTraits[arch]
	if !ok {
		return Config{}, fmt.Errorf("reference: architecture %q: %w (supported: llama, phi3, qwen2, qwen3, qwen3moe, qwen35moe, gemma, gemma2, gemma3)", arch, ErrUnsupported)
	}
	c := Config{Arch: arch, RopeNeox: tr.neox, QKNorm: tr.qkNorm}
	m := meta{f, arch}
	if c.NLayer, err = m.count("block_count", -1); err != nil {
		return c, err
	}
	if c.NEmbd, err = m.count("embedding_length", -1); err != nil {
		return c, err
	}
	if tr.hybrid {
		c.NFF, err = m.count("feed_forward_length", 0)
	} else {
		c.NFF, err = m.count("feed_forward_length", -1)
	}
	if err != nil {
		return c, err
	}
	if c.NHead, err = m.count("attention.head_count", -1); err != nil {
		return c, err
	}
	if c.NHeadKV, err = m.count("attention.head_count_kv", c.NHead); err != nil {
		return c, err
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("reference: %d query heads cannot share %d KV heads", c.NHead, c.NHeadKV)
	}
	def := c.NEmbd / c.NHead
	if c.HeadDim, err = m.count("attention.key_length", def); err != nil {
		return c, err
	}
	if c.HeadDim == 0 || c.HeadDim%2 != 0 {
		return c, fmt.Errorf("reference: head size %d must be positive and even", c.HeadDim)
	}
	vdim, err := m.count("attention.value_length", def)
	if err != nil {
		return c, err
	}
	if vdim != c.HeadDim {
		return c, fmt.Errorf("reference: value head size %d differs from key head size %d", vdim, c.HeadDim)
	}
	if c.NRot, err = m.count("rope.dimension_count", c.HeadDim); err != nil {
		return c, err
	}
	if tr.hybrid || tr.longRope {
		if c.NRot%2 != 0 || c.NRot > c.HeadDim {
			return c, fmt.Errorf("reference: rope.dimension_count %d must be even and at most the head size %d", c.NRot, c.HeadDim)
		}
	} else if c.NRot != c.HeadDim {
		return c, fmt.Errorf("reference: rope.dimension_count %d differs from the head size %d (llama.cpp requires them equal for %s)", c.NRot, c.HeadDim, arch)
	}
	if !f.Has(m.key("attention.layer_norm_rms_epsilon")) {
		return c, fmt.Errorf("reference: key %q is missing", m.key("attention.layer_norm_rms_epsilon"))
	}
	if c.Eps, err = m.number("attention.layer_norm_rms_epsilon", 0); err != nil {
		return c, err
	}
	if c.Eps < 0 || c.Eps > 1 {
		return c, fmt.Errorf("reference: key %q = %g is out of range", m.key("attention.layer_norm_rms_epsilon"), c.Eps)
	}
	if c.RopeBase, err = m.number("rope.freq_base", 10000); err != nil {
		return c, err
	}
	if c.RopeBase <= 0 {
		return c, fmt.Errorf("reference: key %q = %g is out of range", m.key("rope.freq_base"), c.RopeBase)
	}
	if err := readRopeScaling(m, &c); err != nil {
		return c, err
	}
	if tr.gemma {
		if err := readGemma(m, &c); err != nil {
			return c, err
		}
	}
	if tr.hybrid {
		if err := readHybrid(m, &c); err != nil {
			return c, err
		}
	} else if arch == "llama" || tr.moe {
		if err := readExperts(m, &c, tr.moe); err != nil {
			return c, err
		}
	}
	return c, nil
}

// readExperts reads the experts of a llama file (optional: Mixtral-style MoE, every layer's
// feed-forward is expert_count experts of feed_forward_length, expert_used_count per token, no
// shared expert) or a qwen3moe one (required, experts of expert_feed_forward_length, by
// default feed_forward_length / expert_used_count).
func readExperts(m meta, c *Config, required bool) error {
	var err error
	if c.NExpert, err = m.natural("expert_count"); err != nil {
		return err
	}
	if c.NExpert == 0 { // dense
		if required {
			return fmt.Errorf("reference: key %q is missing or 0", m.key("expert_count"))
		}
		return nil
	}
	if c.NExpertUsed, err = m.count("expert_used_count", -1); err != nil {
		return err
	}
	if c.NExpertUsed == 0 || c.NExpertUsed > c.NExpert {
		return fmt.Errorf("reference: key %q = %d: want 1 … %q = %d", m.key("expert_used_count"), c.NExpertUsed, m.key("expert_count"), c.NExpert)
	}
	c.NFFExp = c.NFF
	if required {
		c.NFFExp, err = m.count("expert_feed_forward_length", c.NFF/c.NExpertUsed)
	}
	return err
}

// readHybrid reads the qwen35moe keys: the trunk and its layer pattern, the IMROPE sections,
// the experts and the Gated DeltaNet sizes. It checks them the way llama.cpp's loader and
// graph rely on them.
func readHybrid(m meta, c *Config) error {
	var err error
	blocks := c.NLayer
	if c.NextN, err = m.natural("nextn_predict_layers"); err != nil {
		return err
	}
	if c.NextN >= blocks {
		return fmt.Errorf("reference: key %q = %d leaves no layer of the %d in %q", m.key("nextn_predict_layers"), c.NextN, blocks, m.key("block_count"))
	}
	c.NLayer = blocks - c.NextN
	if c.Recurrent, err = readLayerPattern(m, blocks, c.NLayer); err != nil {
		return err
	}
	if c.RopeSections, err = readSections(m); err != nil {
		return err
	}

	if c.NExpert, err = m.count("expert_count", -1); err != nil {
		return err
	}
	if c.NExpertUsed, err = m.count("expert_used_count", -1); err != nil {
		return err
	}
	if c.NExpertUsed > c.NExpert {
		return fmt.Errorf("reference: key %q = %d exceeds %q = %d", m.key("expert_used_count"), c.NExpertUsed, m.key("expert_count"), c.NExpert)
	}
	// llama.cpp's fallbacks when the expert lengths are absent: n_ff / n_expert_used and n_ff.
	if c.NFFExp, err = m.count("expert_feed_forward_length", c.NFF/c.NExpertUsed); err != nil {
		return err
	}
	if c.NFFExp == 0 {
		return fmt.Errorf("reference: key %q is missing (and %q gives no fallback)", m.key("expert_feed_forward_length"), m.key("feed_forward_length"))
	}
	if c.NFFShared, err = m.count("expert_shared_feed_forward_length", c.NFF); err != nil {
		return err
	}
	if c.NFFShared == 0 {
		return fmt.Errorf("reference: key %q is missing (and %q gives no fallback)", m.key("expert_shared_feed_forward_length"), m.key("feed_forward_length"))
	}

	for _, k := range []struct {
		dst *int
		key string
	}{
		{&c.ConvKernel, "ssm.conv_kernel"},
		{&c.SSMHeadDim, "ssm.state_size"},
		{&c.SSMKHeads, "ssm.group_count"},
		{&c.SSMVHeads, "ssm.time_step_rank"},
	} {
		if *k.dst, err = m.count(k.key, -1); err != nil {
			return err
		}
	}
	inner, err := m.count("ssm.inner_size", -1)
	if err != nil {
		return err
	}
	if inner != c.SSMVHeads*c.SSMHeadDim {
		return fmt.Errorf("reference: key %q = %d is not %q · %q = %d · %d", m.key("ssm.inner_size"), inner,
			m.key("ssm.time_step_rank"), m.key("ssm.state_size"), c.SSMVHeads, c.SSMHeadDim)
	}
	if c.SSMVHeads%c.SSMKHeads != 0 {
		return fmt.Errorf("reference: %q = %d value heads cannot share %q = %d key heads", m.key("ssm.time_step_rank"), c.SSMVHeads, m.key("ssm.group_count"), c.SSMKHeads)
	}
	return nil
}

// readLayerPattern returns, for each of the n trunk layers, whether it is a Gated DeltaNet
// layer. attention.recurrent_layers (one bool or integer per block, nonzero = recurrent)
// takes precedence; otherwise layer i is full attention iff (i+1) is a multiple of
// full_attention_interval (default 4).
func readLayerPattern(m meta, blocks, n int) ([]bool, error) {
	rec := make([]bool, n)
	key := m.key("attention.recurrent_layers")
	if v, ok := m.f.Lookup(key); ok {
		var flags []bool
		if b, isBools := v.Any().([]bool); isBools {
			flags = b
		} else {
			ints, err := m.f.Ints(key)
			if err != nil {
				return nil, fmt.Errorf("reference: %w", err)
			}
			for _, x := range ints {
				flags = append(flags, x != 0)
			}
		}
		if len(flags) != blocks {
			return nil, fmt.Errorf("reference: key %q has %d values for %d blocks", key, len(flags), blocks)
		}
		copy(rec, flags)
		return rec, nil
	}
	interval, err := m.count("full_attention_interval", 4)
	if err != nil {
		return nil, err
	}
	for i := range rec {
		rec[i] = (i+1)%interval != 0
	}
	return rec, nil
}

// readSections reads rope.dimension_sections: an array of 4 non-negative integers, or one
// integer for all four (as llama.cpp accepts). They must not all be 0.
func readSections(m meta) ([4]int, error) {
	var sec [4]int
	key := m.key("rope.dimension_sections")
	v, ok := m.f.Lookup(key)
	if !ok {
		return sec, fmt.Errorf("reference: key %q is missing", key)
	}
	var vals []int64
	if _, isArr := v.Elem(); isArr {
		var err error
		if vals, err = m.f.Ints(key); err != nil {
			return sec, fmt.Errorf("reference: %w", err)
		}
		if len(vals) != 4 {
			return sec, fmt.Errorf("reference: key %q has %d values, want 4", key, len(vals))
		}
	} else {
		x, err := m.f.Int(key)
		if err != nil {
			return sec, fmt.Errorf("reference: %w", err)
		}
		vals = []int64{x, x, x, x}
	}
	sum := 0
	for i, x := range vals {
		if x < 0 || x > 1<<16 {
			return sec, fmt.Errorf("reference: key %q: section %d = %d is out of range", key, i, x)
		}
		sec[i] = int(x)
		sum += sec[i]
	}
	if sum == 0 {
		return sec, fmt.Errorf("reference: key %q: the sections are all 0", key)
	}
	return sec, nil
}

// readRopeScaling sets RopeScale and RopeAttn the way llama.cpp derives them (llama_model's
// load_hparams and llama_context): the factor comes from rope.scaling.factor, else
// rope.scale_linear, 0 meaning none; it applies unless rope.scaling.type is "none", and a
// missing type is "linear".
func readRopeScaling(m meta, c *Config) error {
	typ, err := m.f.StringOr(m.key("rope.scaling.type"), "linear")
	if err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	switch typ {
	case "none", "linear", "longrope": // longrope's frequency factors are tensors (phi3)
	case "yarn":
		return fmt.Errorf("reference: rope scaling %q: %w", typ, ErrUnsupported)
	default:
		return fmt.Errorf("reference: key %q = %q is not a rope scaling type", m.key("rope.scaling.type"), typ)
	}
	factorKey := "rope.scaling.factor"
	if !m.f.Has(m.key(factorKey)) {
		factorKey = "rope.scale_linear"
	}
	factor, err := m.number(factorKey, 0)
	if err != nil {
		return err
	}
	if factor < 0 {
		return fmt.Errorf("reference: key %q = %g is negative", m.key(factorKey), factor)
	}
	c.RopeScale = 1
	if factor != 0 && typ != "none" {
		c.RopeScale = factor
	}
	if c.RopeAttn, err = m.number("rope.scaling.attn_factor", 1); err != nil {
		return err
	}
	return nil
}

// ErrUnsupported is wrapped by the errors for files that are valid but use an architecture,
// a feature or a tensor type the reference does not implement.
var ErrUnsupported = errors.New("not supported by the reference")
