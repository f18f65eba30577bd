package engine

import (
	"errors"
	"fmt"
	"strings"

	"verity/host/exec"
	"verity/host/machine"
	"verity/host/model"
	"verity/repack"
)

// ErrMemory is wrapped by the error of a load that does not fit in memory (a *MemoryError).
var ErrMemory = errors.New("not enough memory")

// MemoryError is a load refused before anything was allocated: what it needs, in parts, and
// what the memory it would take from has.
type MemoryError struct {
	Where string // "host memory" or a device's name
	Need  int64
	Have  int64
	// HaveWhat says what Have is ("the budget: 19.7 GiB available", "90 % of 80 GiB").
	HaveWhat string
	Parts    []Part
	// Context and Sessions are the load's; MaxContext is the longest context that fits beside
	// the rest with that many sessions (0 when not even one position does).
	Context, Sessions, MaxContext int
}

// Part is one part of a load's memory.
type Part struct {
	What  string
	Bytes int64
}

func (e *MemoryError) Error() string {
	parts := make([]string, 0, len(e.Parts))
	for _, p := range e.Parts {
		if p.Bytes > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", machine.HumanBytes(p.Bytes), p.What))
		}
	}
	s := fmt.Sprintf("engine: %v: a context of %s for %s needs %s of %s (%s), more than %s",
		ErrMemory, positions(e.Context), sessions(e.Sessions), machine.HumanBytes(e.Need), e.Where, strings.Join(parts, " + "), e.HaveWhat)
	if e.MaxContext > 0 {
		s += fmt.Sprintf("; a context of at most %s fits for %s", positions(e.MaxContext), sessions(e.Sessions))
	} else {
		s += fmt.Sprintf("; not even one position fits for %s", sessions(e.Sessions))
	}
	return s
}

func (e *MemoryError) Unwrap() error { return ErrMemory }

// positions is "1 position" or "n positions".
func positions(n int) string {
	if n == 1 {
		return "1 position"
	}
	return fmt.Sprintf("%d positions", n)
}

// sessions is "1 session" or "n sessions".
func sessions(n int) string {
	if n == 1 {
		return "1 session"
	}
	return fmt.Sprintf("%d sessions", n)
}

// Footprint is the memory an executor with options eo takes, by part: the private parts
// (allocated) and the weights, of which some may be read from file mappings (pageable: the
// kernel can drop those pages and read them again).
type Footprint struct {
	KV      int64 // K/V caches, at the program's cache types
	States  int64 // recurrent states
	Scratch int64 // step buffers, key lists, attention scratch
	// Matrices are the weights in device layout, Plain the other tensors as the file has them
	// (norms, embeddings); Mapped* the bytes of each read from a file mapping.
	Matrices, MappedMatrices int64
	Plain, MappedPlain       int64
	// KVPerSlot is the K/V bytes of one cache slot (a position of a session).
	KVPerSlot int64
}

// Private is what must be allocated: everything but the mapped weights.
func (f Footprint) Private() int64 {
	return f.KV + f.States + f.Scratch + f.Matrices - f.MappedMatrices + f.Plain - f.MappedPlain
}

// Total is everything, mapped weights included (what a device holding it all needs).
func (f Footprint) Total() int64 { return f.KV + f.States + f.Scratch + f.Matrices + f.Plain }

// Add is the sum of two footprints.
func (f Footprint) Add(g Footprint) Footprint {
	return Footprint{KV: f.KV + g.KV, States: f.States + g.States, Scratch: f.Scratch + g.Scratch,
		Matrices: f.Matrices + g.Matrices, MappedMatrices: f.MappedMatrices + g.MappedMatrices,
		Plain: f.Plain + g.Plain, MappedPlain: f.MappedPlain + g.MappedPlain, KVPerSlot: f.KVPerSlot + g.KVPerSlot}
}

// Weights are the weight bytes, mapped or not.
func (f Footprint) Weights() int64 { return f.Matrices + f.Plain }

// Mapped are the weight bytes read from file mappings.
func (f Footprint) Mapped() int64 { return f.MappedMatrices + f.MappedPlain }

// FootprintOf measures the footprint of an executor of p with options eo (exec.Memory's sum,
// taken apart). mappedMatrix says whether a matrix's device-layout bytes come from a mapping
// (a packed file), mappedPlain whether another tensor's bytes do (the model file's mapping);
// either may be nil (none).
func FootprintOf(p *model.Program, eo exec.Options, mappedMatrix, mappedPlain func(name string) bool) (Footprint, error) {
	total, err := exec.Memory(p, eo)
	if err != nil {
		return Footprint{}, err
	}
	noKV, noStates := eo, eo
	noKV.NSlots, noStates.NStates = 0, 0
	a, err := exec.Memory(p, noKV)
	if err != nil {
		return Footprint{}, err
	}
	b, err := exec.Memory(p, noStates)
	if err != nil {
		return Footprint{}, err
	}
	one := noKV
	one.NSlots = 1
	c, err := exec.Memory(p, one)
	if err != nil {
		return Footprint{}, err
	}
	f := Footprint{KV: total - a, States: total - b, KVPerSlot: c - a}
	lo, hi := eo.Ops[0], eo.Ops[1]
	if lo == 0 && hi == 0 {
		hi = len(p.Ops)
	}
	matrices := exec.Matrices(p, lo, hi)
	isMatrix := map[string]bool{}
	for _, name := range matrices {
		isMatrix[name] = true
		l, err := repack.NewLayout(p.Tensors[name].Type, p.Tensors[name].Dims)
		if err != nil {
			return Footprint{}, err
		}
		f.Matrices += l.Size()
		if mappedMatrix != nil && mappedMatrix(name) {
			f.MappedMatrices += l.Size()
		}
	}
	// the other tensors the ops read (exec uploads them as they are; a tied output matrix is
	// also an embedding, so both)
	plain := map[string]bool{}
	for _, op := range p.Ops[lo:hi] {
		switch op.Kind {
		case model.OpMatVec, model.OpMoEMatVec, model.OpMoEDown, model.OpMoEGateUp:
			continue
		}
		for _, w := range []string{op.Weight, op.Weight2} {
			if w != "" && !plain[w] {
				plain[w] = true
				n := int64(len(p.Tensors[w].Data))
				f.Plain += n
				if mappedPlain != nil && mappedPlain(w) {
					f.MappedPlain += n
				}
			}
		}
	}
	f.Scratch = total - f.KV - f.States - f.Matrices - f.Plain
	return f, nil
}

// checkFits refuses a load whose private memory exceeds the budget (host memory), saying by how
// much and which context would fit.
func checkFits(where string, need Footprint, private bool, have int64, haveWhat string, o LoadOptions) error {
	n := need.Total()
	if private {
		n = need.Private()
	}
	if n <= have {
		return nil
	}
	parts := []Part{{"K/V cache", need.KV}, {"recurrent states", need.States}, {"step buffers", need.Scratch}}
	if private {
		parts = append(parts, Part{"weights in private memory", need.Matrices - need.MappedMatrices + need.Plain - need.MappedPlain})
	} else {
		parts = append(parts, Part{"weights", need.Weights()})
	}
	e := &MemoryError{Where: where, Need: n, Have: have, HaveWhat: haveWhat, Parts: parts, Context: o.Context, Sessions: o.Sessions}
	if rest := n - need.KV; rest < have && need.KVPerSlot > 0 {
		// slots = Sessions·Context + MaxRows (ExecOptions)
		slots := (have - rest) / need.KVPerSlot
		e.MaxContext = int(max(0, (slots-int64(o.MaxRows))/int64(max(1, o.Sessions))))
	}
	return e
}
