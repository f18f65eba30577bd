package engine

import (
	"errors"
	"fmt"

	"verity/device"
	"verity/device/dtype"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/lora"
	"verity/host/machine"
	"verity/host/model"
	"verity/host/packfile"
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
	// Budget is the host memory the load may take (0: what the machine has now, within the
	// process's cgroup limit: host/machine; negative: unchecked). A load whose private memory
	// — K/V caches, states, step buffers, weights not read from a mapping — exceeds it (or a
	// device's memory, on a GPU) is refused with a *MemoryError before anything is allocated.
	Budget int64
	// InMemory packs the matrices into private memory instead of mapping a packed-weights file
	// beside the model (host/packfile; written on first use). A file not opened by gguf.Open is
	// always packed in memory.
	InMemory bool
	// Prefetch chooses whether a prefetcher reads each layer's weights ahead of it (and drops
	// the streamed ones behind it unless KeepBehind): by default when the mapped weights exceed
	// StreamShare of the memory left beside the load's private memory.
	Prefetch   Prefetch
	KeepBehind bool
	// PackProgress, if set, is called as a packed-weights file is written.
	PackProgress func(done, total int64)
	// CacheK and CacheV are the K and V caches' element types: F32 (the zero value), F16 or
	// BF16 (kernels.CacheTypes).
	CacheK, CacheV dtype.Type
}

// Model is an engine together with the file and executor it owns.
type Model struct {
	*Engine
	File    *gguf.File
	LoRA    *lora.Result // what was merged into the weights; nil without adapters
	Weights Weights      // where the weights live, and the memory the load takes

	packed *packfile.File
	stream *prefetcher
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
//
// Nothing is allocated before the load is known to fit (LoadOptions.Budget). A file opened by
// gguf.Open has its matrices mapped from a packed-weights file beside it (written on the first
// load; host/packfile) rather than copied into private memory.
func FromFileSplit(f *gguf.File, backends []device.Backend, firstLayers []int, o LoadOptions) (*Model, error) {
	weights, merged := f, (*lora.Result)(nil)
	if len(o.Adapters) > 0 {
		lo := o.LoRA
		if lo.Memory == 0 {
			if mem, err := machine.ReadMemory(); err == nil {
				lo.Memory = mem.BudgetBytes // the cgroup's limit counts
			}
		}
		v, res, err := lora.Merge(f, o.Adapters, lo)
		if err != nil {
			return nil, err
		}
		weights, merged = v, res
	}
	lp, err := prepare(f, weights, backends, firstLayers, o, 0)
	if err != nil {
		return nil, err
	}
	p, o, eo, firstLayers, w := lp.Program, lp.Options, lp.Exec, lp.FirstLayers, lp.Weights
	var pf *packfile.File
	if w.Packed != "" {
		if pf, err = packfile.Open(f, lp.packable, o.PackProgress); err != nil {
			// no packed file (no room on disk, say): the matrices go to private memory, if
			// they fit there
			o.InMemory = true
			if lp, err = prepare(f, weights, backends, firstLayers, o, 0); err != nil {
				return nil, err
			}
			p, eo, w = lp.Program, lp.Exec, lp.Weights
		} else {
			w.Packed, w.Wrote = pf.Path(), pf.Wrote
			// the model file's mapping now serves only embedding rows and small vectors: no
			// reading around a fault (the kernel's read-around would page in megabytes of
			// layers the packed file has)
			f.AdviseRandom()
			eo.Packed = map[string][]byte{}
			for _, t := range lp.packable {
				eo.Packed[t.Name], _ = pf.Data(t.Name)
			}
			if w.Segments != nil {
				if w.Segments, err = segments(p, pf.Span); err != nil {
					pf.Close()
					return nil, err
				}
				w.StreamedBytes, w.Window = chooseResident(w.Segments, w.room)
			}
		}
	}
	ok := false
	defer func() {
		if !ok && pf != nil {
			pf.Close()
		}
	}()
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
	m := &Model{Engine: e, File: f, LoRA: merged, Weights: w, packed: pf}
	hostStages := 0
	for _, st := range stagesOf(ex) {
		if !machine.IsGPU(st.Backend()) {
			hostStages++
		}
	}
	switch {
	case pf != nil && hostStages == 0:
		// every matrix is on a device now: the mapping's pages are not needed
		pf.DontNeed(0, pf.Size())
		pf.Close()
		m.packed = nil
	case pf != nil && w.Prefetching && !o.Megakernel:
		m.stream = newPrefetcher(pf, w.Segments, !o.KeepBehind, w.Window)
		for _, st := range stagesOf(ex) {
			if !machine.IsGPU(st.Backend()) {
				st.BeforeOp = m.stream.beforeOp
			}
		}
	}
	m.Weights.Prefetching = m.stream != nil
	ok = true
	return m, nil
}

// LoadPlan is a load decided but not done (PlanLoad): the compiled program, the options with
// their defaults, the executor's sizes, the layers' placement, each stage's memory, and where
// the weights would live.
type LoadPlan struct {
	Program     *model.Program
	Options     LoadOptions
	Exec        exec.Options
	FirstLayers []int // the first layer of every pipeline stage after the first
	Stages      []Stage
	Weights     Weights

	packable []packfile.Tensor
}

// Stage is one pipeline stage of a load: its backend, ops and layers, the memory it takes and
// the memory it may use (a GPU's 90 %; the host's budget, shared by every host stage).
type Stage struct {
	Backend   string
	GPU       bool
	Ops       [2]int
	Layers    [2]int // [first, end)
	Footprint Footprint
	Memory    int64
}

// PlanLoad decides what FromFileSplit would do with f, backends, firstLayers and o, without
// allocating or writing anything: it returns the plan, or the *MemoryError the load would
// fail with. LoRA adapters are counted by the private memory their merge would take (the
// program is the base model's).
func PlanLoad(f *gguf.File, backends []device.Backend, firstLayers []int, o LoadOptions) (*LoadPlan, error) {
	var extra int64
	if len(o.Adapters) > 0 {
		lp, err := lora.NewPlan(f, o.Adapters, o.LoRA)
		if err != nil {
			return nil, err
		}
		extra = lp.Bytes
	}
	return prepare(f, f, backends, firstLayers, o, extra)
}

// prepare compiles weights (f, or a view of it with merged tensors), fills in o's defaults,
// places the layers, decides where the matrices live — a packed-weights file mapped
// read-only, or private memory — checks that the load fits the host's budget and each
// device's memory, and decides whether the model streams. extra is private host memory the
// load takes beyond what the executors allocate (merged tensors not yet merged).
func prepare(f, weights *gguf.File, backends []device.Backend, firstLayers []int, o LoadOptions, extra int64) (*LoadPlan, error) {
	p, err := model.Build(weights)
	if err != nil {
		return nil, err
	}
	if err := p.SetCacheTypes(o.CacheK, o.CacheV); err != nil {
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
	lp := &LoadPlan{Program: p, Options: o, Exec: eo, FirstLayers: firstLayers}
	ranges, err := stageOps(p, firstLayers)
	if err != nil {
		return nil, err
	}
	budget, haveWhat := o.Budget, ""
	if budget == 0 {
		budget = -1
		if mem, err := machine.ReadMemory(); err == nil {
			budget = mem.BudgetBytes
			haveWhat = fmt.Sprintf("the host memory budget, %s (available now", machine.HumanBytes(budget))
			if cg := mem.Cgroup; cg != nil && cg.RoomBytes <= mem.AvailableBytes {
				haveWhat += fmt.Sprintf(" within the cgroup v%d limit of %s", cg.Version, machine.HumanBytes(cg.LimitBytes))
			}
			haveWhat += ")"
		}
	} else {
		haveWhat = fmt.Sprintf("the given budget of %s", machine.HumanBytes(budget))
	}
	hostStages := 0
	for _, b := range backends {
		if !machine.IsGPU(b) {
			hostStages++
		}
	}
	src := f.Source()
	inPack := map[string]bool{}
	if !o.InMemory && src.Path != "" && f.Mapped() && hostStages > 0 {
		lp.packable = packedTensors(f, p)
		for _, t := range lp.packable {
			inPack[t.Name] = true
		}
	}
	mappedPlain := func(name string) bool {
		_, ok := f.Offset(p.Tensors[name].Data)
		return ok && f.Mapped()
	}
	var host Footprint
	for k, r := range ranges {
		so := eo
		if len(ranges) > 1 {
			so.Ops = r
		}
		b := backends[k]
		st := Stage{Backend: b.Name(), GPU: machine.IsGPU(b), Ops: r, Layers: [2]int{0, p.Config.NLayer}}
		if k > 0 {
			st.Layers[0] = firstLayers[k-1]
		}
		if k < len(firstLayers) {
			st.Layers[1] = firstLayers[k]
		}
		if st.GPU {
			if st.Footprint, err = FootprintOf(p, so, nil, nil); err != nil {
				return nil, err
			}
			st.Memory = memoryOf(b)
			if err := checkFits(b.Name(), st.Footprint, false, st.Memory, fmt.Sprintf("90 %% of its memory, %s", machine.HumanBytes(st.Memory)), o); err != nil {
				return nil, err
			}
		} else {
			if st.Footprint, err = FootprintOf(p, so, func(n string) bool { return inPack[n] }, mappedPlain); err != nil {
				return nil, err
			}
			st.Memory = budget
			host = host.Add(st.Footprint)
		}
		lp.Stages = append(lp.Stages, st)
	}
	host.Scratch += extra
	if budget >= 0 && hostStages > 0 {
		if err := checkFits("host memory", host, true, budget, haveWhat, o); err != nil {
			return nil, err
		}
	}
	w := Weights{Footprint: host, Budget: budget}
	lp.Weights = w
	if len(lp.packable) == 0 {
		return lp, nil
	}
	w.Packed = packfile.Candidates(src.Path)[0] // where it will be (or the cache)
	w.room = 1 << 62
	if budget >= 0 {
		w.room = max(0, budget-host.Private()-RuntimeReserve)
	}
	w.Streaming = float64(host.MappedMatrices) > StreamShare*float64(w.room)
	w.room = int64(StreamShare * float64(w.room))
	if w.Segments, err = segments(p, virtualSpans(lp.packable)); err != nil {
		return nil, err
	}
	w.StreamedBytes, w.Window = chooseResident(w.Segments, w.room)
	w.Prefetching = o.Prefetch == PrefetchOn || o.Prefetch == PrefetchAuto && w.Streaming
	lp.Weights = w
	return lp, nil
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

// Close frees the device memory and unmaps the files.
func (m *Model) Close() error {
	err := m.Engine.Executor().Close()
	if m.stream != nil {
		m.stream.close()
	}
	if m.packed != nil {
		err = errors.Join(err, m.packed.Close())
	}
	return errors.Join(err, m.File.Close())
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

// stagesOf lists the executors of a runner (one, or a pipeline's stages).
func stagesOf(ex exec.Runner) []*exec.Executor {
	switch r := ex.(type) {
	case *exec.Executor:
		return []*exec.Executor{r}
	case *exec.Pipeline:
		return r.Stages()
	}
	return nil
}

// stageOps are the op ranges of the pipeline stages that start at firstLayers (one stage of
// every op without them).
func stageOps(p *model.Program, firstLayers []int) ([][2]int, error) {
	cuts, err := exec.BlockCuts(p, firstLayers)
	if err != nil {
		return nil, err
	}
	out := make([][2]int, 0, len(cuts)+1)
	lo := 0
	for _, c := range cuts {
		out = append(out, [2]int{lo, c})
		lo = c
	}
	return append(out, [2]int{lo, len(p.Ops)}), nil
}
