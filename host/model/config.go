package model

import (
	"fmt"
	"math"

	"verity/host/gguf"
)

// Config holds the hyper-parameters of a model, read from GGUF metadata.
type Config struct {
	Arch     string
	Name     string
	NLayer   int
	NEmbd    int
	NFF      int
	NHead    int
	NHeadKV  int
	HeadDim  int // key/query head size (attention.key_length, default n_embd / n_head)
	ValueDim int // value head size (attention.value_length, default HeadDim)
	NVocab   int
	NCtx     int // training context length
	// MaxContext, when not 0, is the longest session the Program computes as llama.cpp would:
	// phi3's long-context files rotate with their short RoPE factors up to the original
	// context (rope.scaling.original_context_length) and with the long ones past it, which
	// Verity does not do.
	MaxContext int
	Eps        float32
	// RoPE
	NRot      int     // rotated dims per head (rope.dimension_count, default HeadDim)
	RopeBase  float64 // rope.freq_base (default 10000)
	RopeMode  int32   // kernels.RopeAdjacent or kernels.RopeNeox
	RopeScale float64 // linear position scaling factor (rope.scaling.factor when type is linear), 1 = none
	RopeAttn  float64 // rope.scaling.attn_factor: multiplies cos θ and sin θ (default 1)
	AttnScale float32 // 1/sqrt(HeadDim)
	Tied      bool    // output head shares token_embd
	MoE       MoEConfig
}

// meta reads typed metadata with errors that name the key.
type meta struct {
	f    *gguf.File
	arch string
}

func (m meta) key(k string) string { return m.arch + "." + k }

// int returns a required positive integer key.
func (m meta) int(k string) (int, error) {
	v, err := m.f.Int(m.key(k))
	if err != nil {
		return 0, fmt.Errorf("model: %w", err)
	}
	if v <= 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("model: key %q = %d is out of range", m.key(k), v)
	}
	return int(v), nil
}

// intOr returns an optional positive integer key.
func (m meta) intOr(k string, def int) (int, error) {
	if !m.f.Has(m.key(k)) {
		return def, nil
	}
	return m.int(k)
}

func (m meta) floatOr(k string, def float64) (float64, error) {
	v, err := m.f.FloatOr(m.key(k), def)
	if err != nil {
		return 0, fmt.Errorf("model: %w", err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("model: key %q = %v is not finite", m.key(k), v)
	}
	return v, nil
}

// readCommon reads the keys every transformer architecture shares.
func readCommon(f *gguf.File, arch string) (Config, error) {
	m := meta{f, arch}
	c := Config{Arch: arch}
	c.Name, _ = f.StringOr("general.name", "")
	var err error
	if c.NLayer, err = m.int("block_count"); err != nil {
		return c, err
	}
	if c.NEmbd, err = m.int("embedding_length"); err != nil {
		return c, err
	}
	if c.NHead, err = m.int("attention.head_count"); err != nil {
		return c, err
	}
	if c.NHeadKV, err = m.intOr("attention.head_count_kv", c.NHead); err != nil {
		return c, err
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("model: %d query heads cannot share %d KV heads", c.NHead, c.NHeadKV)
	}
	def := 0
	if c.NEmbd%c.NHead == 0 {
		def = c.NEmbd / c.NHead
	}
	if c.HeadDim, err = m.intOr("attention.key_length", def); err != nil {
		return c, err
	}
	if c.HeadDim == 0 {
		return c, fmt.Errorf("model: embedding_length %d is not divisible by %d heads and %q is absent", c.NEmbd, c.NHead, m.key("attention.key_length"))
	}
	if c.ValueDim, err = m.intOr("attention.value_length", c.HeadDim); err != nil {
		return c, err
	}
	if c.NCtx, err = m.intOr("context_length", 4096); err != nil {
		return c, err
	}
	eps, err := m.floatOr("attention.layer_norm_rms_epsilon", 1e-5)
	if err != nil {
		return c, err
	}
	if eps <= 0 || eps > 1 {
		return c, fmt.Errorf("model: key %q = %g is out of range", m.key("attention.layer_norm_rms_epsilon"), eps)
	}
	c.Eps = float32(eps)
	if c.NRot, err = m.intOr("rope.dimension_count", c.HeadDim); err != nil {
		return c, err
	}
	if c.NRot > c.HeadDim || c.NRot%2 != 0 {
		return c, fmt.Errorf("model: rope.dimension_count %d must be even and at most the head size %d", c.NRot, c.HeadDim)
	}
	if c.RopeBase, err = m.floatOr("rope.freq_base", 10000); err != nil {
		return c, err
	}
	if c.RopeBase <= 1 {
		return c, fmt.Errorf("model: key %q = %g is out of range", m.key("rope.freq_base"), c.RopeBase)
	}
	// Linear position scaling: llama.cpp applies rope.scaling.factor (or the older
	// rope.scale_linear) unless rope.scaling.type says "none"; a missing type means linear.
	c.RopeScale = 1
	st, err := f.StringOr(m.key("rope.scaling.type"), "linear")
	if err != nil {
		return c, fmt.Errorf("model: %w", err)
	}
	switch st {
	case "none":
	case "linear", "longrope": // llama.cpp reads the factor alike (longrope's frequency factors are tensors)
		factor, err := m.floatOr("rope.scaling.factor", 0)
		if err != nil {
			return c, err
		}
		if factor == 0 {
			if factor, err = m.floatOr("rope.scale_linear", 0); err != nil {
				return c, err
			}
		}
		if factor < 0 {
			return c, fmt.Errorf("model: rope scaling factor %g must be positive", factor)
		}
		if factor > 0 {
			c.RopeScale = factor
		}
	default:
		return c, fmt.Errorf("model: rope scaling %q is not supported", st)
	}
	if c.RopeAttn, err = m.floatOr("rope.scaling.attn_factor", 1); err != nil {
		return c, err
	}
	// llama.cpp scales attention by 1/sqrt(head size) for these architectures; it does not
	// read attention.scale for them, and neither does Verity.
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	return c, nil
}
