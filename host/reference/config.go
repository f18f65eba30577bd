package reference

import (
	"errors"
	"fmt"
	"math"

	"verity/host/gguf"
)

// Config holds the hyper-parameters the forward pass uses, as read from the GGUF metadata.
type Config struct {
	Arch    string // general.architecture: "llama" or "qwen3"
	NLayer  int    // block_count
	NEmbd   int    // embedding_length
	NFF     int    // feed_forward_length
	NHead   int    // attention.head_count
	NHeadKV int    // attention.head_count_kv (default NHead)
	HeadDim int    // attention.key_length (default NEmbd/NHead); also the value head size and n_rot
	NVocab  int    // rows of token_embd.weight
	Eps     float64

	RopeBase    float64 // rope.freq_base (default 10000)
	RopeScale   float64 // linear position scaling factor s: θ is divided by s; 1 = none
	RopeAttn    float64 // rope.scaling.attn_factor: multiplies cos θ and sin θ (default 1)
	RopeNeox    bool    // pairs (i, i+D/2) (qwen3) rather than (2i, 2i+1) (llama)
	QKNorm      bool    // per-head RMSNorm of q and k before RoPE (qwen3)
	RopeFactors bool    // rope_freqs.weight divides the frequencies (llama 3)
	Tied        bool    // no output.weight: the head is token_embd
}

// archTraits are what distinguishes the supported architectures.
var archTraits = map[string]struct{ neox, qkNorm, ropeFactors bool }{
	"llama": {neox: false, qkNorm: false, ropeFactors: true},
	"qwen3": {neox: true, qkNorm: true, ropeFactors: false},
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
		return Config{}, fmt.Errorf("reference: architecture %q: %w (supported: llama, qwen3)", arch, ErrUnsupported)
	}
	c := Config{Arch: arch, RopeNeox: tr.neox, QKNorm: tr.qkNorm}
	m := meta{f, arch}
	if c.NLayer, err = m.count("block_count", -1); err != nil {
		return c, err
	}
	if c.NEmbd, err = m.count("embedding_length", -1); err != nil {
		return c, err
	}
	if c.NFF, err = m.count("feed_forward_length", -1); err != nil {
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
	nrot, err := m.count("rope.dimension_count", c.HeadDim)
	if err != nil {
		return c, err
	}
	if nrot != c.HeadDim {
		return c, fmt.Errorf("reference: rope.dimension_count %d differs from the head size %d (llama.cpp requires them equal for %s)", nrot, c.HeadDim, arch)
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
	return c, nil
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
	case "none", "linear":
	case "yarn", "longrope":
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
	if factor != 0 && typ == "linear" {
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
