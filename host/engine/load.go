package engine

import (
	"errors"
	"fmt"

	"verity/device"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/lora"
	"verity/host/model"
	"verity/split"
)

// LoadOptions size a loaded model's engine.
type LoadOptions struct {
	MaxRows int // step size: prefill chunk and largest tree (default 64)
	Context int // positions per session (default 2048, capped at the model's n_ctx)
	// Sessions is how many full-length sessions the cache must hold at once (default 1).
	Sessions int
	// Megakernel runs every step as one megakernel stream (on each pipeline stage) instead of
	// one launch per op, with MegakernelSMs queues (0: the backend's choice).
	Megakernel    bool
	MegakernelSMs int
	// PrefixCache keeps closed sessions' K/V entries and states for new prompts that begin
	// with the same tokens (Options.PrefixCache); a recurrent model's sessions then hold one
	// more state each (the one before their prompt's last token).
	PrefixCache bool
	// Adapters are LoRA adapters merged into the weights before the model is compiled
	// (lora.Merge, with the options LoRA); the kernels then see ordinary tensors.
	Adapters []lora.Use
	LoRA     lora.Options
}

// Model is an engine together with the file and executor it owns.
type Model struct {
	*Engine
	File *gguf.File
	LoRA *lora.Result // what was merged into the weights; nil without adapters
}

// Load opens a GGUF file, compiles it and prepares an engine on backend b.
func Load(path string, b device.Backend, o LoadOptions) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f, b, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromFile is Load for an already opened file (which the Model then owns).
func FromFile(f *gguf.File, b device.Backend, o LoadOptions) (*Model, error) {
	return FromFileSplit(f, []device.Backend{b}, nil, o)
}

// LoadSplit is Load with the model's layers split across backends (see FromFileSplit).
func LoadSplit(path string, backends []device.Backend, firstLayers []int, o LoadOptions) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFileSplit(f, backends, firstLayers, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromFileSplit is FromFile with the model's layers split across backends: stage k runs on
// backends[k], from layer firstLayers[k−1] (layer 0 and the embedding for stage 0) to the next
// stage's first layer (the output head on the last stage). With one backend and no
// firstLayers it is FromFile. With several backends and no firstLayers, PlanLayers places the
// layers by each backend's memory. The logits are bit-identical to a single backend's (see
// exec.Pipeline).
func FromFileSplit(f *gguf.File, backends []device.Backend, firstLayers []int, o LoadOptions) (*Model, error) {
	weights, merged := f, (*lora.Result)(nil)
	if len(o.Adapters) > 0 {
		v, res, err := lora.Merge(f, o.Adapters, o.LoRA)
		if err != nil {
			return nil, err
		}
		weights, merged = v, res
	}
	p, err := model.Build(weights)
	if err != nil {
		return nil, err
	}
	if o.MaxRows == 0 {
		o.MaxRows = 64
	}
	if o.Context == 0 {
		o.Context = min(2048, p.Config.NCtx)
		if mc := p.Config.MaxContext; mc > 0 {
			o.Context = min(o.Context, mc)
		}
	}
	if mc := p.Config.MaxContext; mc > 0 && o.Context > mc {
		return nil, fmt.Errorf("engine: a context of %d positions: this model is computed as llama.cpp computes it up to %d (its original context; longer ones need its long RoPE factors, which Verity does not apply)", o.Context, mc)
	}
	if o.Sessions == 0 {
		o.Sessions = 1
	}
	if o.MaxRows < 1 || o.Context < 1 || o.Sessions < 1 {
		return nil, fmt.Errorf("engine: bad load options %+v", o)
	}
	eo := ExecOptions(p, o)
	if n := p.Config.NLayer; len(backends) > n {
		return nil, fmt.Errorf("engine: a model of %d layers cannot be split into %d stages (one per backend), at least one layer each", n, len(backends))
	}
	if len(backends) == 1 && len(firstLayers) > 0 {
		return nil, fmt.Errorf("engine: a split at layers %v needs several backends (one per stage); there is one", firstLayers)
	}
	if len(firstLayers) > 0 && len(firstLayers) != len(backends)-1 {
		return nil, fmt.Errorf("engine: %d backends split the model at %d layers (the first layer of every stage after the first), got %d: %v", len(backends), len(backends)-1, len(firstLayers), firstLayers)
	}
	if len(backends) > 1 && len(firstLayers) == 0 {
		mem := make([]int64, len(backends))
		for k, b := range backends {
			mem[k] = memoryOf(b)
		}
		if firstLayers, err = PlanLayers(p, eo, mem); err != nil {
			return nil, err
		}
	}
	var ex exec.Runner
	if len(backends) == 1 && len(firstLayers) == 0 {
		ex, err = exec.New(backends[0], p, eo)
	} else {
		var cuts []int
		if cuts, err = exec.BlockCuts(p, firstLayers); err == nil {
			ex, err = exec.NewPipeline(backends, p, eo, cuts)
		}
	}
	if err != nil {
		return nil, err
	}
	if o.Megakernel {
		if err := useMegakernel(ex, o.MegakernelSMs); err != nil {
			ex.Close()
			return nil, err
		}
	}
	e, err := New(ex, Options{Context: o.Context, PrefixCache: o.PrefixCache})
	if err != nil {
		ex.Close()
		return nil, err
	}
	return &Model{Engine: e, File: f, LoRA: merged}, nil
}

// useMegakernel makes every executor of ex run its steps as megakernel streams.
func useMegakernel(ex exec.Runner, sms int) error {
	stages := []*exec.Executor{}
	switch r := ex.(type) {
	case *exec.Executor:
		stages = append(stages, r)
	case *exec.Pipeline:
		stages = r.Stages()
	}
	for _, st := range stages {
		r, err := exec.NewMegakernelRunner(st.Backend(), sms)
		if err != nil {
			return err
		}
		st.UseMegakernel(r)
	}
	return nil
}

// ExecOptions are the executor sizes a model loaded with o needs: MaxRows rows per step, a K/V
// slot per position of every session plus a step's worth, and recurrent state slots.
func ExecOptions(p *model.Program, o LoadOptions) exec.Options {
	eo := exec.Options{MaxRows: o.MaxRows, NSlots: o.Sessions*o.Context + o.MaxRows}
	if p.StateLayers > 0 {
		per := StatesPerSession(o.MaxRows)
		if o.PrefixCache {
			per++ // the state before the prompt's last token, kept for the cache
		}
		eo.NStates = 1 + o.Sessions*per
	}
	return eo
}

// Close frees the device memory and unmaps the file.
func (m *Model) Close() error {
	return errors.Join(m.Engine.Executor().Close(), m.File.Close())
}

// memoryOf is the memory a pipeline stage on b may use: 90 % of the device's memory where the
// backend reports it (a GPU; the rest for the driver's context, JIT-compiled code and
// fragmentation), else an equal share for every backend (so that planning balances bytes).
func memoryOf(b device.Backend) int64 {
	if m, ok := b.(interface{ TotalMemory() (int64, error) }); ok {
		if n, err := m.TotalMemory(); err == nil && n > 0 {
			return n / 10 * 9
		}
	}
	return 1 << 50
}

// PlanLayers chooses the first layer of each pipeline stage after the first, for devices
// with the given memory (bytes a stage may use): split.Plan over each candidate stage's
// exact footprint (exec.Memory of its ops: weights in device layout, caches, states and step
// buffers).
func PlanLayers(p *model.Program, eo exec.Options, memory []int64) ([]int, error) {
	n := p.Config.NLayer
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	starts, err := exec.BlockCuts(p, all)
	if err != nil {
		return nil, err
	}
	var costErr error
	memo := map[[2]int]int64{} // a range's footprint is the same on every device
	cost := func(k, lo, hi int) int64 {
		if m, ok := memo[[2]int{lo, hi}]; ok {
			return m
		}
		o := eo
		o.Ops = [2]int{0, len(p.Ops)}
		if lo > 0 {
			o.Ops[0] = starts[lo]
		}
		if hi < n {
			o.Ops[1] = starts[hi]
		}
		m, err := exec.Memory(p, o)
		if err != nil {
			costErr = err
		}
		memo[[2]int{lo, hi}] = m
		return m
	}
	first, err := split.Plan(n, memory, cost)
	if costErr != nil {
		return nil, costErr
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return first, nil
}
