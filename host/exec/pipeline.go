package exec

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"verity/device"
	"verity/host/model"
)

// Runner is what an engine drives: an Executor on one backend, or a Pipeline across several.
type Runner interface {
	Program() *model.Program
	Options() Options
	// Name describes where the ops run (the backend, or each stage's).
	Name() string
	Run(s Step) ([]float32, error)
	ClearState(s int32) error
	CopyState(dst, src int32) error
	Close() error
}

// Profiler is a Runner that can time each op (Executor.Profile; a Pipeline sets it on every
// stage). nil turns the timing off.
type Profiler interface {
	SetProfile(f func(op *model.Op, d time.Duration))
}

// SetProfile times every stage's ops with f.
func (pl *Pipeline) SetProfile(f func(op *model.Op, d time.Duration)) {
	for _, st := range pl.stages {
		st.Profile = f
	}
}

// Name is the backend's name, and the megakernel's size where steps run through one.
func (e *Executor) Name() string {
	if m, ok := e.launcher.(*Megakernel); ok {
		return fmt.Sprintf("%s, megakernel on %d SMs", e.b.Name(), m.cfg.SMs)
	}
	return e.b.Name()
}

// Pipeline runs a Program split across backends (devices): stage k runs a contiguous range of
// the ops on its own backend and holds only that range's weights, K/V caches and recurrent
// states. Before a stage runs, the buffers its ops read that an earlier stage wrote (the
// residual stream at a layer boundary) are copied to it through the host. Every op runs
// exactly as it does on one device, so a pipeline's logits are bit-identical to an Executor's.
type Pipeline struct {
	p      *model.Program
	opt    Options
	stages []*Executor
	in     [][]handoff // per stage: the buffers copied in before it runs
	stats  HandoffStats
}

// HandoffStats count a pipeline's hand-offs since it was built: the buffers copied from one
// stage to the next, their bytes, and the host time the copies took (Read from the source
// stage and Write to the next, timed after the source's work has finished, so the copy alone).
type HandoffStats struct {
	Count int64         `json:"count"`
	Bytes int64         `json:"bytes"`
	Time  time.Duration `json:"time_ns"`
}

// Handoffs returns the hand-offs so far.
func (pl *Pipeline) Handoffs() HandoffStats { return pl.stats }

// handoff is a buffer a stage reads, last written by stage from.
type handoff struct {
	buf  model.Buf
	from int
}

// NewPipeline builds one stage per backend; stage k runs ops [cuts[k-1], cuts[k]) (the first
// from op 0, the last to the end), so cuts holds len(backends)−1 increasing op indices.
// BlockCuts turns layer boundaries into op indices.
func NewPipeline(backends []device.Backend, p *model.Program, opt Options, cuts []int) (*Pipeline, error) {
	if len(backends) == 0 || len(cuts) != len(backends)-1 {
		return nil, fmt.Errorf("exec: %d backends need %d cuts, got %d", len(backends), max(len(backends)-1, 0), len(cuts))
	}
	bounds := append(append([]int{0}, cuts...), len(p.Ops))
	for k := 0; k+1 < len(bounds); k++ {
		if bounds[k] >= bounds[k+1] {
			return nil, fmt.Errorf("exec: pipeline cuts %v are not increasing op indices inside (0, %d)", cuts, len(p.Ops))
		}
	}
	// A layer's K/V cache lives on the stage that holds its attention ops: a cut between a
	// layer's kv_store and its attention would leave the attention reading a cache nothing wrote.
	stageOf := func(i int) int {
		k := 0
		for k+1 < len(bounds) && bounds[k+1] <= i {
			k++
		}
		return k
	}
	cacheStage := map[int]int{}
	for i, op := range p.Ops {
		if op.Kind != model.OpKVStore && op.Kind != model.OpAttention {
			continue
		}
		if k, ok := cacheStage[op.Layer]; ok && k != stageOf(i) {
			return nil, fmt.Errorf("exec: pipeline cuts %v separate cache layer %d's K/V store from its attention (cut at layer boundaries: BlockCuts)", cuts, op.Layer)
		}
		cacheStage[op.Layer] = stageOf(i)
	}
	pl := &Pipeline{p: p, opt: opt, in: make([][]handoff, len(backends))}
	writer := map[model.Buf]int{} // buffer → the stage that wrote it last
	for k, b := range backends {
		o := opt
		o.Ops = [2]int{bounds[k], bounds[k+1]}
		st, err := New(b, p, o)
		if err != nil {
			pl.Close()
			return nil, fmt.Errorf("exec: pipeline stage %d (%s): %w", k, b.Name(), err)
		}
		pl.stages = append(pl.stages, st)
		seen := map[model.Buf]bool{}
		for _, op := range p.Ops[bounds[k]:bounds[k+1]] {
			for _, in := range op.In {
				if from, ok := writer[in]; ok && from != k && !seen[in] {
					seen[in] = true
					pl.in[k] = append(pl.in[k], handoff{in, from})
				}
			}
			writer[op.Out] = k
			if op.Kind == model.OpSplitGate || op.Kind == model.OpRouter { // the kinds with a second output
				writer[op.Out2] = k
			}
		}
	}
	return pl, nil
}

// BlockCuts returns the op index at which each of the given layers (blocks, "blk.N.") begins:
// the cuts NewPipeline takes to place the layers before each of them on earlier stages.
func BlockCuts(p *model.Program, blocks []int) ([]int, error) {
	first := map[int]int{}
	for i, op := range p.Ops {
		var n int
		if _, err := fmt.Sscanf(op.Name, "blk.%d.", &n); err == nil && strings.HasPrefix(op.Name, fmt.Sprintf("blk.%d.", n)) {
			if _, ok := first[n]; !ok {
				first[n] = i
			}
		}
	}
	cuts := make([]int, len(blocks))
	for j, b := range blocks {
		i, ok := first[b]
		if !ok {
			return nil, fmt.Errorf("exec: the program has no layer %d (%d layers)", b, len(first))
		}
		cuts[j] = i
	}
	return cuts, nil
}

func (pl *Pipeline) Program() *model.Program { return pl.p }
func (pl *Pipeline) Options() Options        { return pl.opt }

// Stages returns the stages' executors, in order.
func (pl *Pipeline) Stages() []*Executor { return pl.stages }

// Name lists the stages' backends in order.
func (pl *Pipeline) Name() string {
	names := make([]string, len(pl.stages))
	for k, st := range pl.stages {
		names[k] = st.Name()
	}
	return "pipeline: " + strings.Join(names, " → ")
}

// rowsOf is the number of rows buffer buf holds in step s.
func (pl *Pipeline) rowsOf(buf model.Buf, s *Step) int {
	switch pl.p.Buffers[buf].Rows {
	case "out":
		return len(s.OutRows)
	case "moe":
		return len(s.Tokens) * pl.p.Used
	}
	return len(s.Tokens)
}

// Run runs the stages in order, handing buffers over between them; the last stage returns the
// logits.
func (pl *Pipeline) Run(s Step) ([]float32, error) {
	if err := s.check(pl.p, pl.opt, true); err != nil {
		return nil, err
	}
	var logits []float32
	for k, st := range pl.stages {
		synced := map[int]bool{}
		for _, h := range pl.in[k] {
			n := pl.rowsOf(h.buf, &s) * pl.p.Buffers[h.buf].RowBytes()
			if n == 0 {
				continue
			}
			data := make([]byte, n)
			src := pl.stages[h.from]
			if !synced[h.from] { // the Read would wait for it anyway; the timing leaves it out
				if err := src.b.Sync(); err != nil {
					return nil, fmt.Errorf("exec: pipeline: stage %d: %w", h.from, err)
				}
				synced[h.from] = true
			}
			start := time.Now()
			if err := src.b.Read(data, src.bufs[h.buf]); err != nil {
				return nil, fmt.Errorf("exec: pipeline: read %s from stage %d: %w", pl.p.Buffers[h.buf].Name, h.from, err)
			}
			if err := st.b.Write(st.bufs[h.buf], data); err != nil {
				return nil, fmt.Errorf("exec: pipeline: write %s to stage %d: %w", pl.p.Buffers[h.buf].Name, k, err)
			}
			pl.stats.Count++
			pl.stats.Bytes += int64(n)
			pl.stats.Time += time.Since(start)
		}
		l, err := st.Run(s)
		if err != nil {
			return nil, fmt.Errorf("exec: pipeline stage %d: %w", k, err)
		}
		logits = l
	}
	return logits, nil
}

// ClearState zeroes recurrent state slot s on every stage.
func (pl *Pipeline) ClearState(s int32) error {
	for _, st := range pl.stages {
		if err := st.ClearState(s); err != nil {
			return err
		}
	}
	return nil
}

// CopyState copies recurrent state slot src to dst on every stage.
func (pl *Pipeline) CopyState(dst, src int32) error {
	for _, st := range pl.stages {
		if err := st.CopyState(dst, src); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every stage (not the backends).
func (pl *Pipeline) Close() error {
	var errs []error
	for _, st := range pl.stages {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
