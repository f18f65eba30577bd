package lora

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"verity/host/gguf"
	"verity/host/quant"
)

// The errors an adapter that cannot be merged gives, wrapped with the file and the tensor.
var (
	ErrNotAdapter   = errors.New("not a LoRA adapter")
	ErrArchitecture = errors.New("architecture differs from the model's")
	ErrPair         = errors.New("not a lora_a/lora_b pair")
	ErrTarget       = errors.New("no such tensor in the model")
	ErrShape        = errors.New("shape does not fit the model's tensor")
	ErrNotWritable  = errors.New("cannot be written merged")
)

// Adapter is a LoRA adapter file, checked on its own (Read); NewPlan checks it against a model.
type Adapter struct {
	Path  string  // the file, "" when read from memory
	Name  string  // general.name, if set
	Arch  string  // general.architecture
	Alpha float64 // adapter.lora.alpha (0: the scale is used as is)
	Pairs []Pair  // sorted by target name

	file *gguf.File
	own  bool // Close closes file
}

// Pair is the adapter of one target tensor.
type Pair struct {
	Target string // the model's tensor, e.g. "blk.0.attn_q.weight"
	A, B   gguf.TensorInfo
	Rank   int // r: lora_b's ne0
	// Embedding is set for token_embd.weight, whose pair comes transposed (lora_a ne =
	// [r, n_vocab], lora_b ne = [r, n_embd]).
	Embedding bool
}

// Factor is what B·A is multiplied by at the adapter scale s: s·alpha/r, or s when alpha is 0
// (llama.cpp's rule).
func (a *Adapter) Factor(p Pair, s float64) float64 {
	if a.Alpha == 0 {
		return s
	}
	return s * a.Alpha / float64(p.Rank)
}

// Ranks returns the distinct ranks of the adapter's pairs, smallest first.
func (a *Adapter) Ranks() []int {
	seen := map[int]bool{}
	var out []int
	for _, p := range a.Pairs {
		if !seen[p.Rank] {
			seen[p.Rank] = true
			out = append(out, p.Rank)
		}
	}
	sort.Ints(out)
	return out
}

// Open reads the adapter file at path. Close it when the models it is merged into are loaded.
func Open(path string) (*Adapter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	a, err := Read(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	a.Path, a.own = path, true
	return a, nil
}

// Close releases the file of an adapter from Open; for one from Read it does nothing.
func (a *Adapter) Close() error {
	if !a.own {
		return nil
	}
	return a.file.Close()
}

// Read checks that f is a LoRA adapter — general.type "adapter", adapter.type "lora", an
// architecture, a finite alpha, and only complete pairs of 2-D lora_a/lora_b tensors of a type
// Verity reads, with one rank per pair — and describes it. f must stay open while the adapter
// is used. Activated LoRA (adapter.alora.invocation_tokens), which applies only after given
// tokens, cannot be merged and is refused; so are the norm vectors llama.cpp ignores.
func Read(f *gguf.File) (*Adapter, error) {
	gt, err := f.StringOr("general.type", "")
	if err != nil || gt != "adapter" {
		return nil, fmt.Errorf("lora: %w: general.type is %s, want \"adapter\"", ErrNotAdapter, describeKey(f, "general.type"))
	}
	at, err := f.StringOr("adapter.type", "")
	if err != nil || at != "lora" {
		return nil, fmt.Errorf("lora: %w: adapter.type is %s, want \"lora\"", ErrNotAdapter, describeKey(f, "adapter.type"))
	}
	if f.Has("adapter.alora.invocation_tokens") {
		return nil, fmt.Errorf("lora: %w: an activated LoRA (adapter.alora.invocation_tokens) applies only after its invocation tokens and cannot be merged into the weights", ErrNotAdapter)
	}
	a := &Adapter{file: f}
	if a.Arch, err = f.String("general.architecture"); err != nil {
		return nil, fmt.Errorf("lora: %w: %w", ErrNotAdapter, err)
	}
	a.Name, _ = f.StringOr("general.name", "")
	if a.Alpha, err = f.FloatOr("adapter.lora.alpha", 0); err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	if math.IsNaN(a.Alpha) || math.IsInf(a.Alpha, 0) {
		return nil, fmt.Errorf("lora: adapter.lora.alpha is %v", a.Alpha)
	}
	halves := map[string]*Pair{}
	for _, t := range f.Tensors {
		target, isA := strings.CutSuffix(t.Name, ".lora_a")
		isB := false
		if !isA {
			target, isB = strings.CutSuffix(t.Name, ".lora_b")
		}
		if !isA && !isB {
			return nil, fmt.Errorf("lora: tensor %q: %w: only <tensor>.lora_a and <tensor>.lora_b can be merged", t.Name, ErrPair)
		}
		if len(t.Dims) != 2 {
			return nil, fmt.Errorf("lora: tensor %q: %w: it has %d dims, want 2", t.Name, ErrShape, len(t.Dims))
		}
		if _, err := quant.Lookup(t.Type); err != nil {
			return nil, fmt.Errorf("lora: tensor %q: %w", t.Name, err)
		}
		if f.Data(t) == nil {
			return nil, fmt.Errorf("lora: tensor %q: its data lies outside the file", t.Name)
		}
		p := halves[target]
		if p == nil {
			p = &Pair{Target: target, Embedding: strings.HasSuffix(target, "token_embd.weight")}
			halves[target] = p
		}
		if isA {
			p.A = t
		} else {
			p.B = t
		}
	}
	for _, p := range halves {
		if p.A.Name == "" || p.B.Name == "" {
			missing := p.Target + ".lora_a"
			if p.A.Name != "" {
				missing = p.Target + ".lora_b"
			}
			return nil, fmt.Errorf("lora: tensor %q: %w: %s is missing", p.Target, ErrPair, missing)
		}
		// Ordinary pairs: A ne = [n_in, r], B ne = [r, n_out]. The embedding's: A ne = [r,
		// n_vocab], B ne = [r, n_embd]. Either way r is B's ne0.
		p.Rank = int(p.B.Dims[0])
		ar := p.A.Dims[1]
		if p.Embedding {
			ar = p.A.Dims[0]
		}
		if p.Rank < 1 || ar != p.B.Dims[0] {
			return nil, fmt.Errorf("lora: tensor %q: %w: lora_a %v and lora_b %v do not share a rank", p.Target, ErrShape, p.A.Dims, p.B.Dims)
		}
		a.Pairs = append(a.Pairs, *p)
	}
	if len(a.Pairs) == 0 {
		return nil, fmt.Errorf("lora: %w: the file has no lora_a/lora_b tensors", ErrNotAdapter)
	}
	sort.Slice(a.Pairs, func(i, j int) bool { return a.Pairs[i].Target < a.Pairs[j].Target })
	return a, nil
}

// describeKey quotes a string key's value, or says it is absent or of another type.
func describeKey(f *gguf.File, key string) string {
	v, ok := f.Lookup(key)
	if !ok {
		return "not set"
	}
	if s, err := f.String(key); err == nil {
		return fmt.Sprintf("%q", s)
	}
	return "a " + v.Type().String()
}
