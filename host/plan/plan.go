// Package plan decides how a model runs on this machine, from what host/machine measured and
// what the compiled Program needs: the context whose K/V cache fits a stated share of the
// memory the weights leave (capped by the context the model was trained for), which layers
// stay resident and which stream from the disk, the layers' placement across GPUs (package
// split, by each device's memory), and the decode, prefill and verify rates to expect
// (predict.go), each with its reasons in words. A context or a batch that does not fit is
// refused before anything is allocated, with the numbers (engine.MemoryError).
package plan

import (
	"errors"
	"fmt"
	"strings"

	"verity/device"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/machine"
)

// Shares of the memory the weights leave that the default context's K/V cache takes: a
// quarter on the host, where the rest of the system lives too, and nine tenths of a GPU's,
// which holds nothing else.
const (
	HostKVShare = 0.25
	GPUKVShare  = 0.9
)

// Options say what the plan is for.
type Options struct {
	// Load is the load the plan is for: its Context (0: the plan's choice), Sessions,
	// MaxRows, adapters and the rest.
	Load engine.LoadOptions
	// Backends run the model (several: a pipeline, FirstLayers or placed by memory).
	Backends    []device.Backend
	FirstLayers []int
	// KVShare, if set, replaces HostKVShare (and GPUKVShare) for the default context.
	KVShare float64
}

// Plan is how a model runs here.
type Plan struct {
	Model  string `json:"model"`
	Arch   string `json:"arch"`
	Layers int    `json:"layers"`
	// TrainedContext is the model's context_length; RopeContext, when set, the longest
	// context its RoPE is computed for (longer ones are refused).
	TrainedContext int `json:"trained_context"`
	RopeContext    int `json:"rope_context,omitempty"`
	// Context is the positions per session; ContextFrom says why: "requested", "memory" (the
	// K/V share of the memory the weights leave) or "trained" (the model's context).
	Context     int     `json:"context"`
	ContextFrom string  `json:"context_from"`
	Sessions    int     `json:"sessions"`
	MaxRows     int     `json:"step_rows"`
	KVShare     float64 `json:"kv_share"`
	// KVPerPosition is the K/V cache bytes of one position (all layers, at the cache types);
	// KVBytes the cache's (every session's context plus a step).
	KVPerPosition int64 `json:"kv_bytes_per_position"`
	KVBytes       int64 `json:"kv_bytes"`
	// Budget is the host memory the load may take; Usable what the weights and the rest
	// leave of it for the K/V cache.
	Budget  int64 `json:"budget_bytes"`
	Usable  int64 `json:"usable_bytes"`
	Weights struct {
		Bytes   int64  `json:"bytes"`         // in device layout and as stored
		Mapped  int64  `json:"mapped_bytes"`  // read from file mappings (pageable)
		Private int64  `json:"private_bytes"` // the load's private memory, K/V cache included
		Packed  string `json:"packed_file,omitempty"`
		// Streaming says the mapped weights exceed engine.StreamShare of the memory left:
		// Streamed segments are read from the disk every step (StreamedBytes), Resident
		// ones stay in memory.
		Streaming     bool     `json:"streaming"`
		Resident      []string `json:"resident,omitempty"`
		Streamed      []string `json:"streamed,omitempty"`
		StreamedBytes int64    `json:"streamed_bytes"`
	} `json:"weights"`
	Stages    []Stage     `json:"stages"`
	Predicted *Prediction `json:"predicted,omitempty"`
	// Rationale says, in words, why each choice was made; Warnings what the user should know.
	Rationale []string `json:"rationale"`
	Warnings  []string `json:"warnings,omitempty"`

	load *engine.LoadPlan
}

// Stage is where a range of layers runs and the memory it takes there.
type Stage struct {
	Backend string `json:"backend"`
	GPU     bool   `json:"gpu"`
	Layers  [2]int `json:"layers"` // [first, end)
	Need    int64  `json:"need_bytes"`
	// Memory is what the stage may use: 90 % of a GPU's memory, or the host's budget.
	Memory int64 `json:"memory_bytes"`
}

// Load is the engine's plan of the load (for LoadOptions and the footprint).
func (p *Plan) Load() *engine.LoadPlan { return p.load }

// LoadOptions are the load's options with the plan's context: what engine.Load takes.
func (p *Plan) LoadOptions() engine.LoadOptions {
	o := p.load.Options
	return o
}

// Make plans model f (called name) on o.Backends with what m measured. With o.Load.Context 0
// it chooses the context: the largest whose K/V cache fits the K/V share of the memory the
// weights and the step buffers leave, capped by the model's trained context (and rounded down
// to a multiple of 64 past 64). A requested context or batch that does not fit is an
// *engine.MemoryError; one beyond the trained context fits but is warned about.
func Make(f *gguf.File, name string, m *machine.Machine, o Options) (*Plan, error) {
	if len(o.Backends) == 0 {
		return nil, errors.New("plan: no backend")
	}
	if err := m.Refresh(); err != nil {
		return nil, err
	}
	lo := o.Load
	pl := &Plan{Model: name, Sessions: max(1, lo.Sessions)}
	requested := lo.Context
	// the load with one position: everything but the K/V cache, and its bytes per position
	probe := lo
	probe.Context, probe.Budget = 1, -1
	lp, err := engine.PlanLoad(f, o.Backends, o.FirstLayers, probe)
	if err != nil {
		return nil, err
	}
	prog := lp.Program
	c := prog.Config
	pl.Arch, pl.Layers, pl.TrainedContext, pl.RopeContext = c.Arch, c.NLayer, c.NCtx, c.MaxContext
	pl.MaxRows = lp.Options.MaxRows
	trained := c.NCtx
	if c.MaxContext > 0 {
		trained = min(trained, c.MaxContext)
	}
	var why []string
	if requested == 0 {
		ctx, from, reasons, err := chooseContext(lp, lo, o, pl.Sessions, m)
		if err != nil {
			return nil, err
		}
		pl.ContextFrom, pl.KVShare, pl.Usable = from, reasons.share, reasons.usable
		why = reasons.lines
		if ctx > trained {
			ctx, pl.ContextFrom = trained, "trained"
			why = append(why, fmt.Sprintf("capped at the %d positions the model was trained for (more would fit)", trained))
		}
		if ctx < 1 {
			// not even one position: the load's own error says by how much
			lo.Context = 1
			if _, err := engine.PlanLoad(f, o.Backends, o.FirstLayers, lo); err != nil {
				return nil, err
			}
			ctx = 1
		}
		lo.Context = ctx
	} else {
		pl.ContextFrom = "requested"
		why = append(why, fmt.Sprintf("a context of %d positions was asked for", requested))
		if requested > c.NCtx {
			pl.Warnings = append(pl.Warnings, fmt.Sprintf("a context of %d positions exceeds the %d the model was trained for: positions past it are computed, but the model never learned them", requested, c.NCtx))
		}
	}
	pl.Context = lo.Context
	if lp, err = engine.PlanLoad(f, o.Backends, o.FirstLayers, lo); err != nil {
		return nil, err
	}
	pl.load = lp
	pl.fill(lp)
	pl.Rationale = append(why, pl.Rationale...)
	return pl, nil
}

// contextReasons is how chooseContext came to its context.
type contextReasons struct {
	share  float64
	usable int64
	lines  []string
}

// chooseContext is the largest context whose K/V cache fits the share of what each stage's
// memory leaves beside its other parts (the host's budget shared by its stages), before the
// trained-context cap.
func chooseContext(lp *engine.LoadPlan, lo engine.LoadOptions, o Options, sessions int, m *machine.Machine) (int, string, contextReasons, error) {
	var r contextReasons
	slots := int64(-1)
	var host engine.Footprint
	hostStages := 0
	for _, st := range lp.Stages {
		fp := st.Footprint
		if !st.GPU {
			host, hostStages = host.Add(fp), hostStages+1
			continue
		}
		share := GPUKVShare
		if o.KVShare > 0 {
			share = o.KVShare
		}
		left := st.Memory - (fp.Total() - fp.KV)
		n := int64(float64(max(0, left))*share) / max(1, fp.KVPerSlot)
		r.lines = append(r.lines, fmt.Sprintf("%s: %s of its %s is left beside layers %d–%d's weights and buffers; the K/V cache may take %.0f %% of it, %d positions",
			st.Backend, machine.HumanBytes(left), machine.HumanBytes(st.Memory), st.Layers[0], st.Layers[1]-1, 100*share, n))
		if slots < 0 || n < slots {
			slots = n
		}
		r.share = share
	}
	if hostStages > 0 {
		share := HostKVShare
		if o.KVShare > 0 {
			share = o.KVShare
		}
		budget := lo.Budget
		if budget == 0 {
			budget = m.Budget()
		}
		other := host.Private() - host.KV + engine.RuntimeReserve
		left := budget - other
		weights := host.Mapped()
		var line string
		if float64(weights) <= engine.StreamShare*float64(left) {
			left -= weights
			line = fmt.Sprintf("the host budget is %s; the weights (%s, mapped) and %s of buffers and runtime leave %s",
				machine.HumanBytes(budget), machine.HumanBytes(weights), machine.HumanBytes(other), machine.HumanBytes(max(0, left)))
		} else {
			line = fmt.Sprintf("the host budget is %s; the weights (%s) are more than %.0f %% of what %s of buffers and runtime leave, so they stream from the disk and %s is left",
				machine.HumanBytes(budget), machine.HumanBytes(weights), 100*engine.StreamShare, machine.HumanBytes(other), machine.HumanBytes(max(0, left)))
		}
		r.usable = max(0, left)
		n := int64(float64(r.usable)*share) / max(1, host.KVPerSlot)
		r.lines = append(r.lines, line, fmt.Sprintf("the K/V cache may take %.0f %% of that, %s: %d positions at %s each",
			100*share, machine.HumanBytes(int64(float64(r.usable)*share)), n, machine.HumanBytes(host.KVPerSlot)))
		if slots < 0 || n < slots {
			slots = n
		}
		r.share = share
	}
	ctx := (slots - int64(lp.Options.MaxRows)) / int64(sessions)
	if sessions > 1 {
		r.lines = append(r.lines, fmt.Sprintf("shared by %d sessions, less a step of %d rows", sessions, lp.Options.MaxRows))
	}
	if ctx > 64 {
		ctx = ctx / 64 * 64
	}
	ctx = min(ctx, 1<<30)
	return int(ctx), "memory", r, nil
}

// fill copies the load plan's sizes and placement into the plan and says why.
func (pl *Plan) fill(lp *engine.LoadPlan) {
	w := lp.Weights
	var host engine.Footprint
	for _, st := range lp.Stages {
		fp := st.Footprint
		need := fp.Total()
		if !st.GPU {
			need = fp.Private()
			host = host.Add(fp)
		}
		pl.Stages = append(pl.Stages, Stage{Backend: st.Backend, GPU: st.GPU, Layers: st.Layers, Need: need, Memory: st.Memory})
		pl.KVPerPosition += fp.KVPerSlot
		pl.KVBytes += fp.KV
		pl.Weights.Bytes += fp.Weights()
	}
	pl.Budget = w.Budget
	pl.Weights.Mapped, pl.Weights.Private = host.Mapped(), host.Private()
	pl.Weights.Packed, pl.Weights.Streaming, pl.Weights.StreamedBytes = w.Packed, w.Streaming, w.StreamedBytes
	for _, s := range w.Segments {
		if s.Bytes() == 0 {
			continue
		}
		if s.Resident {
			pl.Weights.Resident = append(pl.Weights.Resident, s.Name)
		} else {
			pl.Weights.Streamed = append(pl.Weights.Streamed, s.Name)
		}
	}
	if len(lp.Stages) > 1 {
		var parts []string
		for _, st := range pl.Stages {
			parts = append(parts, fmt.Sprintf("layers %d–%d on %s (%s of %s)", st.Layers[0], st.Layers[1]-1, st.Backend, machine.HumanBytes(st.Need), machine.HumanBytes(st.Memory)))
		}
		pl.Rationale = append(pl.Rationale, "the layers are split by each device's memory (split.Plan): "+strings.Join(parts, ", "))
	}
	switch {
	case w.Packed != "" && w.Streaming:
		pl.Rationale = append(pl.Rationale, fmt.Sprintf("the weights are mapped from %s and stream: %d segments stay resident, %d are read ahead of each step and dropped behind it (%s a step)",
			w.Packed, len(pl.Weights.Resident), len(pl.Weights.Streamed), machine.HumanBytes(w.StreamedBytes)))
	case w.Packed != "":
		pl.Rationale = append(pl.Rationale, fmt.Sprintf("the weights are mapped from %s (written once beside the model) and stay resident", w.Packed))
	case host.Weights() > 0:
		pl.Rationale = append(pl.Rationale, "the weights are packed into private memory")
	}
}
