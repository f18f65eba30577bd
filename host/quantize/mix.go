package quantize

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"verity/device/dtype"
)

// A quantisation mix: which type each tensor of a model gets for a file type, as llama.cpp's
// quantiser chooses it (llama_model_quantize without an importance matrix or per-tensor
// overrides). What decides it:
//
//   - Only weights are converted (Quantizable: 2-D and 3-D tensors whose names end in
//     "weight", but norms, routers, convolutions and the like); the rest keep their type.
//   - A file type's base type goes to every weight the mix does not single out. For F32, F16
//     and BF16 that is all; Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 single out only the output
//     projection; the K-quant mixes single out more (below). With Pure, nothing is singled
//     out.
//   - The output projection (and the token embedding when the output is tied to it: the file
//     has no output.weight) becomes Q6_K, or stays Q8_0 for Q8_0, or becomes Q8_0 when its
//     rows are not whole blocks of the base type. An untied token embedding keeps the base.
//   - attn_v, and the fused attn_qkv (Phi-3, Qwen3.5's Gated DeltaNet layers: llama.cpp counts
//     them as attn_v), numbered in file order as the mix meets them: Q2_K → Q4_K when
//     n_head/n_head_kv ≥ 4, else Q3_K; Q3_K_M → Q5_K for the first two, Q4_K after; Q3_K_L
//     → Q5_K; Q4_K_M and Q5_K_M → Q6_K for the "more bits" ones; Q4_K_S → Q5_K for the first
//     four. In a 70B-class model (80 layers of llama with grouped K/V, or of qwen2) Q3_K and
//     Q4_K become Q5_K. With exactly 8 experts, Q8_0 (and attn_k too).
//   - ffn_down, and the experts' and shared expert's down projections, by layer (read from
//     the name when the model has experts): Q2_K → Q3_K; Q3_K_M → Q5_K in the first
//     n_layer/16 layers, Q4_K after; Q3_K_L → Q5_K; Q4_K_M, Q5_K_M → Q6_K in the "more bits"
//     layers; Q4_K_S → Q5_K in the first n_layer/8 layers.
//   - attn_output: Q2_K → Q3_K, Q3_K_M → Q4_K, Q3_K_L → Q5_K; with exactly 8 experts, Q5_K
//     for Q2_K, Q3_K_S, Q3_K_M, Q4_K_S and Q4_K_M instead.
//   - The "more bits" ones among n are i < n/8, i ≥ 7n/8 and every third from n/8 + 2.
//   - A type whose blocks do not divide a tensor's rows falls back: Q2_K and Q3_K → Q4_0,
//     Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, and F16 if that still does not divide; other
//     types have no fallback (an error). This also holds with Pure.
//   - OutputType and TokenEmbeddingType, when set, replace the choice for those two
//     tensors outright (no fallback), as llama-quantize's --output-tensor-type and
//     --token-embedding-type do.
//
// The mix walks the tensors in llama.cpp's order — by layer (tensors outside the layers
// first), then by name — which is also the order Write gives the output file.

// Model is what a mix needs to know of a model besides its tensors.
type Model struct {
	Arch    string // general.architecture
	NLayer  int    // block_count
	NHead   int    // attention.head_count (of the first layer)
	NHeadKV int    // attention.head_count_kv (of the first layer)
	NExpert int    // expert_count (0 for dense models)
}

// Tensor is one tensor of a model as a mix sees it.
type Tensor struct {
	Name string
	Type dtype.Type // its type now
	Dims []int64    // fastest first
}

// MixOptions choose a mix.
type MixOptions struct {
	FileType FileType
	// Pure gives every weight the file type's base type (only the row-length fallback still
	// applies), as llama-quantize's --pure.
	Pure bool
	// LeaveOutput keeps output.weight as it is (llama-quantize's --leave-output-tensor).
	LeaveOutput bool
	// OutputType and TokenEmbeddingType, if not nil, are the output projection's and the
	// token embedding's types.
	OutputType, TokenEmbeddingType *dtype.Type
}

// category is llama.cpp's broad class of a tensor, from its name.
type category uint8

const (
	catOther category = iota
	catOutput
	catTokenEmbd
	catAttnQKV
	catAttnKVB
	catAttnV
	catAttnK
	catAttnQ
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	}
	for _, c := range []struct {
		part string
		cat  category
	}{
		{"attn_qkv.weight", catAttnQKV}, {"attn_kv_b.weight", catAttnKVB}, {"attn_v.weight", catAttnV},
		{"attn_k.weight", catAttnK}, {"attn_q.weight", catAttnQ}, {"attn_output.weight", catAttnOutput},
		{"ffn_up", catFFNUp}, {"ffn_gate", catFFNGate}, {"ffn_down", catFFNDown},
	} {
		if strings.Contains(name, c.part) {
			return c.cat
		}
	}
	return catOther
}

// attnVLike: the tensors llama.cpp gives attn_v's treatment.
func (c category) attnVLike() bool { return c == catAttnV || c == catAttnQKV || c == catAttnKVB }

// layerOf returns the layer of a tensor named blk.N.…, or −1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return -1
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// FileOrder sorts tensors as llama.cpp's quantiser visits and writes them: by layer (those
// outside the layers first), then by name.
func FileOrder(ts []Tensor) {
	slices.SortStableFunc(ts, func(a, b Tensor) int {
		if c := cmp.Compare(layerOf(a.Name), layerOf(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// moreBits is llama.cpp's use_more_bits: the first and last eighth, and every third between.
func moreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// Choice is the mix's type for one tensor.
type Choice struct {
	Type dtype.Type
	// Wanted is the type the mix chose before the fallback for the tensor's row length
	// (Type unless it fell back).
	Wanted dtype.Type
}

// Mix returns the type of every tensor of m (in the order of ts) for o.
func Mix(m Model, ts []Tensor, o MixOptions) ([]Choice, error) {
	if !o.FileType.Known() {
		return nil, fmt.Errorf("quantize: unknown file type %d", uint32(o.FileType))
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(layerOf(ts[a].Name), layerOf(ts[b].Name)); c != 0 {
			return c
		}
		return strings.Compare(ts[a].Name, ts[b].Name)
	})
	s := mixState{m: m, o: o, base: o.FileType.Base(), tied: true}
	for _, t := range ts {
		c := categoryOf(t.Name)
		if c.attnVLike() {
			s.nAttnV++
		}
		if c == catOutput {
			s.tied = false
		}
	}
	out := make([]Choice, len(ts))
	for _, i := range order {
		c, err := s.typeOf(ts[i])
		if err != nil {
			return nil, fmt.Errorf("quantize: tensor %q: %w", ts[i].Name, err)
		}
		out[i] = c
	}
	return out, nil
}

// mixState is the mix's walk: what it has counted so far.
type mixState struct {
	m      Model
	o      MixOptions
	base   dtype.Type
	tied   bool // no output.weight: the token embedding is the output projection
	nAttnV int  // attn_v-like tensors in the model
	iAttnV int  // … met so far
	iDown  int  // ffn_down-like tensors met so far
}

func (s *mixState) typeOf(t Tensor) (Choice, error) {
	c := categoryOf(t.Name)
	as := func(t dtype.Type) (Choice, error) { return Choice{t, t}, nil }
	if !Quantizable(t.Name, nDims(t.Dims)) || (s.o.LeaveOutput && c == catOutput) {
		return as(t.Type)
	}
	if s.o.TokenEmbeddingType != nil && c == catTokenEmbd {
		return as(*s.o.TokenEmbeddingType)
	}
	if s.o.OutputType != nil && c == catOutput {
		return as(*s.o.OutputType)
	}
	nt := s.base
	if !nt.Quantized() {
		return as(nt)
	}
	if !s.o.Pure {
		var err error
		if nt, err = s.choose(t, c); err != nil {
			return Choice{}, err
		}
	}
	ft, err := Fallback(nt, t.Dims[0])
	return Choice{ft, nt}, err
}

// choose is the mix proper for a weight of category c (see the package comment above Mix).
func (s *mixState) choose(t Tensor, c category) (dtype.Type, error) {
	ft, m, nt := s.o.FileType, s.m, s.base
	gqa := 0
	if m.NHeadKV > 0 {
		gqa = m.NHead / m.NHeadKV
	}
	switch {
	case c == catOutput || (s.tied && c == catTokenEmbd):
		if s.o.OutputType != nil {
			return *s.o.OutputType, nil
		}
		if t.Dims[0]%int64(nt.BlockSize()) != 0 {
			return dtype.Q8_0, nil
		}
		if nt != dtype.Q8_0 {
			return dtype.Q6_K, nil
		}
	case c == catTokenEmbd:
		// the base type, as llama.cpp gives it for these file types
	case c.attnVLike():
		i := s.iAttnV
		s.iAttnV++
		switch {
		case ft == FileQ2_K:
			nt = dtype.Q3_K
			if gqa >= 4 {
				nt = dtype.Q4_K
			}
		case ft == FileQ3_KM:
			nt = dtype.Q4_K
			if i < 2 {
				nt = dtype.Q5_K
			}
		case ft == FileQ3_KL:
			nt = dtype.Q5_K
		case (ft == FileQ4_KM || ft == FileQ5_KM) && moreBits(i, s.nAttnV):
			nt = dtype.Q6_K
		case ft == FileQ4_KS && i < 4:
			nt = dtype.Q5_K
		}
		if s.is70B() && (nt == dtype.Q3_K || nt == dtype.Q4_K) {
			nt = dtype.Q5_K
		}
		if m.NExpert == 8 {
			nt = dtype.Q8_0
		}
	case c == catAttnK:
		if m.NExpert == 8 {
			nt = dtype.Q8_0
		}
	case c == catFFNDown:
		i, n := s.iDown, m.NLayer
		s.iDown++
		if m.NExpert > 1 { // experts' tensors need not come in layer order: read the layer
			if i = layerOf(t.Name); i < 0 || i >= n {
				return 0, fmt.Errorf("no layer in [0, %d) in its name", n)
			}
		}
		switch {
		case ft == FileQ2_K:
			nt = dtype.Q3_K
		case ft == FileQ3_KM:
			nt = dtype.Q4_K
			if i < n/16 {
				nt = dtype.Q5_K
			}
		case ft == FileQ3_KL:
			nt = dtype.Q5_K
		case (ft == FileQ4_KM || ft == FileQ5_KM) && moreBits(i, n):
			nt = dtype.Q6_K
		case ft == FileQ4_KS && i < n/8:
			nt = dtype.Q5_K
		}
	case c == catAttnOutput:
		if m.NExpert == 8 {
			switch ft {
			case FileQ2_K, FileQ3_KS, FileQ3_KM, FileQ4_KS, FileQ4_KM:
				nt = dtype.Q5_K
			}
			break
		}
		switch ft {
		case FileQ2_K:
			nt = dtype.Q3_K
		case FileQ3_KM:
			nt = dtype.Q4_K
		case FileQ3_KL:
			nt = dtype.Q5_K
		}
	}
	return nt, nil
}

// is70B: llama.cpp's 70B model class, the one whose attn_v gets more bits: 80 layers of llama
// with grouped K/V heads, or of qwen2.
func (s *mixState) is70B() bool {
	m := s.m
	return m.NLayer == 80 && ((m.Arch == "llama" && m.NHead != m.NHeadKV) || m.Arch == "qwen2")
}

// Fallback returns the type llama.cpp uses instead of t for rows of n values: t itself when
// its blocks divide n, else the fallback above, or F16 when that does not divide either.
func Fallback(t dtype.Type, n int64) (dtype.Type, error) {
	if n%int64(t.BlockSize()) == 0 {
		return t, nil
	}
	switch t {
	case dtype.Q2_K, dtype.Q3_K:
		t = dtype.Q4_0
	case dtype.Q4_K:
		t = dtype.Q5_0
	case dtype.Q5_K:
		t = dtype.Q5_1
	case dtype.Q6_K:
		t = dtype.Q8_0
	default:
		return 0, fmt.Errorf("rows of %d values are not whole %s blocks of %d, and %s has no fallback type", n, t, t.BlockSize(), t)
	}
	if n%int64(t.BlockSize()) != 0 {
		return dtype.F16, nil
	}
	return t, nil
}
