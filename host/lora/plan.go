package lora

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"verity/device/dtype"
	"verity/host/gguf"
	"verity/host/quant"
)

// Use is an adapter merged at a scale (1 is the adapter as trained; several adapters sum).
type Use struct {
	Adapter *Adapter
	Scale   float64
}

// Rounding chooses how a quantised code takes its share of Δ.
type Rounding uint8

const (
	// Stochastic rounds up with probability equal to the fraction: unbiased.
	Stochastic Rounding = iota
	// Nearest rounds to the nearest code: a delta below half a step is lost. For comparison.
	Nearest
)

// Options tune a merge.
type Options struct {
	// MergeType, when set ("f32", "f16", "bf16" or "q8_0"), writes every targeted tensor in
	// that type instead of its own (a diagnostic: more of a small delta survives, at the cost
	// of bytes and decode speed).
	MergeType string
	Rounding  Rounding
	Threads   int // workers over a tensor's rows (0: GOMAXPROCS)
	// Memory is the private memory the merged tensors may take: they are copies that cannot
	// be paged back to the file. 0: the memory the system reports available; negative: no
	// limit.
	Memory int64
}

// mergeTypes are the types Options.MergeType may name.
var mergeTypes = map[string]dtype.Type{"f32": dtype.F32, "f16": dtype.F16, "bf16": dtype.BF16, "q8_0": dtype.Q8_0}

// MergeTypes lists the names Options.MergeType accepts.
func MergeTypes() []string {
	out := make([]string, 0, len(mergeTypes))
	for k := range mergeTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Plan is a checked merge: the targets, what each becomes, and the memory it takes.
type Plan struct {
	Targets []Target // sorted by name
	Bytes   int64    // private memory of the merged tensors
	// TiedHead is set when the base has tied embeddings and the embedding is targeted: the
	// merged model gains an output.weight holding the base embedding, so only the input
	// lookup changes.
	TiedHead bool

	base *gguf.File
	uses []Use
	opt  Options
}

// Target is one tensor to merge.
type Target struct {
	Name  string
	Base  gguf.TensorInfo
	Type  dtype.Type // the merged tensor's type
	terms []term     // the pairs that adapt it, in the order of the uses
}

type term struct {
	use  int // index into the plan's uses
	pair Pair
}

// NewPlan checks uses against the base model file: each adapter of the base's architecture,
// each target a 2-D tensor of the base with the shapes llama.cpp checks (lora_a's n_in and
// lora_b's n_out those of the tensor, or for token_embd lora_b's n_embd and lora_a's n_vocab),
// each target's type one the merge writes, and the merged copies within the memory budget.
// Any other case is an error naming the adapter and the tensor.
func NewPlan(base *gguf.File, uses []Use, o Options) (*Plan, error) {
	p := &Plan{base: base, uses: uses, opt: o}
	var into dtype.Type
	wide := o.MergeType != ""
	if wide {
		t, ok := mergeTypes[strings.ToLower(o.MergeType)]
		if !ok {
			return nil, fmt.Errorf("lora: merge type %q: want one of %s", o.MergeType, strings.Join(MergeTypes(), ", "))
		}
		into = t
	}
	arch := base.Architecture()
	_, hasOutput := base.Tensor("output.weight")
	byName := map[string]*Target{}
	for i, u := range uses {
		a := u.Adapter
		where := adapterName(a, i)
		if math.IsNaN(u.Scale) || math.IsInf(u.Scale, 0) {
			return nil, fmt.Errorf("lora: %s: scale %v", where, u.Scale)
		}
		if a.Arch != arch {
			return nil, fmt.Errorf("lora: %s: %w: the adapter is for %q, the model is %q", where, ErrArchitecture, a.Arch, arch)
		}
		for _, pr := range a.Pairs {
			w, ok := base.Tensor(pr.Target)
			if !ok {
				hint := ""
				if pr.Target == "output.weight" {
					hint = " (its output projection is the token embedding)"
				}
				return nil, fmt.Errorf("lora: %s: tensor %q: %w%s", where, pr.Target, ErrTarget, hint)
			}
			if err := checkShape(pr, w); err != nil {
				return nil, fmt.Errorf("lora: %s: tensor %q: %w", where, pr.Target, err)
			}
			t := byName[pr.Target]
			if t == nil {
				t = &Target{Name: pr.Target, Base: w, Type: w.Type}
				if err := writable(w, wide, into); err != nil {
					return nil, fmt.Errorf("lora: %s: tensor %q: %w", where, pr.Target, err)
				}
				if wide {
					t.Type = into
				}
				byName[pr.Target] = t
			}
			t.terms = append(t.terms, term{use: i, pair: pr})
			if pr.Target == "token_embd.weight" && !hasOutput {
				p.TiedHead = true
			}
		}
	}
	for _, t := range byName {
		n, err := t.Type.TensorBytes(t.Base.Dims)
		if err != nil {
			return nil, fmt.Errorf("lora: tensor %q as %s: %w", t.Name, t.Type, err)
		}
		p.Bytes += n
		p.Targets = append(p.Targets, *t)
	}
	sort.Slice(p.Targets, func(i, j int) bool { return p.Targets[i].Name < p.Targets[j].Name })
	if err := p.checkMemory(); err != nil {
		return nil, err
	}
	return p, nil
}

func adapterName(a *Adapter, i int) string {
	if a.Path != "" {
		return "adapter " + a.Path
	}
	return fmt.Sprintf("adapter %d", i+1)
}

// checkShape is llama.cpp's check of a pair against its tensor w.
func checkShape(p Pair, w gguf.TensorInfo) error {
	switch {
	case len(w.Dims) == 3:
		return fmt.Errorf("%w: it is 3-D %v (stacked experts), and merging into expert tensors is not supported", ErrNotWritable, w.Dims)
	case len(w.Dims) != 2:
		return fmt.Errorf("%w: the model's tensor has dims %v, want a matrix", ErrShape, w.Dims)
	}
	in, out := w.Dims[0], w.Dims[1]
	if p.Embedding {
		if p.B.Dims[1] != in || p.A.Dims[1] != out {
			return fmt.Errorf("%w: lora_a %v and lora_b %v, want [r, %d] and [r, %d] for the embedding %v", ErrShape, p.A.Dims, p.B.Dims, out, in, w.Dims)
		}
		return nil
	}
	if p.A.Dims[0] != in || p.B.Dims[1] != out {
		return fmt.Errorf("%w: lora_a %v and lora_b %v, want [%d, r] and [r, %d] for %v", ErrShape, p.A.Dims, p.B.Dims, in, out, w.Dims)
	}
	return nil
}

// writable checks that w can be merged: its type has a grid (or is a float type), or with a
// merge type, that w can be read and its rows fit the merge type's blocks.
func writable(w gguf.TensorInfo, wide bool, into dtype.Type) error {
	if _, err := quant.Lookup(w.Type); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	if wide {
		if _, err := into.RowBytes(w.Dims[0]); err != nil {
			return fmt.Errorf("%w as %s: %w", ErrNotWritable, into, err)
		}
		return nil
	}
	if !isFloat(w.Type) && grids[w.Type] == nil {
		return fmt.Errorf("%w: its type %s has no code grid here (a merge type such as f16 writes it)", ErrNotWritable, w.Type)
	}
	return nil
}

func isFloat(t dtype.Type) bool { return t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 }

// checkMemory fails when the merged copies exceed the budget.
func (p *Plan) checkMemory() error {
	budget, what := p.opt.Memory, "the given budget"
	if budget < 0 {
		return nil
	}
	if budget == 0 {
		n, ok := availableMemory()
		if !ok {
			return nil
		}
		budget, what = n, "the memory available now"
	}
	if p.Bytes > budget {
		return fmt.Errorf("lora: the %d merged tensors need %s of private memory (copies that cannot be paged back to the file), more than %s, %s", len(p.Targets), mib(p.Bytes), what, mib(budget))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
