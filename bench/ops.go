package bench

import (
	"sort"
	"time"

	"verity/device/perf"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/model"
)

// OpTime is what decoding spends on one kind of op — a kernel family, and for weight ops the
// weight type — per token: on a GPU, the device time between events recorded around each
// launch (no sync between ops); on the CPU twin and the PTX interpreter, each op timed alone
// (launch to the end of a sync after it), so the sum exceeds a normal step's time by the
// launch gaps a step hides (Executor.Profile).
type OpTime struct {
	Name  string  `json:"name"`            // op kind, and the weight type of a weight op
	Calls float64 `json:"calls_per_token"` // launches per decoded token
	MS    float64 `json:"ms_per_token"`
	Share float64 `json:"share"`        // of all the timed ops' time
	MB    float64 `json:"mb_per_token"` // the cost model's bytes
	GBs   float64 `json:"gb_s"`         // MB / MS
	// ModelMS and FloorMS are the static performance model's figures for the same launches
	// on perf.DefaultCard (device/perf): the predicted kernel time and its floor (the model's
	// DRAM bytes at the card's bandwidth). Modelled, not measured; zero where the executor
	// cannot list a step's launches (a pipeline of several devices).
	ModelMS float64 `json:"model_ms_per_token,omitempty"`
	FloorMS float64 `json:"floor_ms_per_token,omitempty"`
}

// ProfileOps decodes steps tokens after a prompt of prompt tokens with every op timed, and
// returns the time per token of each kind of op, largest first. It needs an engine whose
// executor is an exec.Profiler and room for the prompt and the steps.
func ProfileOps(e *engine.Engine, prompt, steps int, tok func() int32) ([]OpTime, error) {
	pr, ok := e.Executor().(exec.Profiler)
	if !ok {
		return nil, nil
	}
	p := e.Program()
	opName := func(op *model.Op) string {
		name := op.Kind.String()
		if t, ok := p.Tensors[op.Weight]; ok && op.Weight != "" {
			name += " " + t.Type.String()
		}
		return name
	}
	modelled := modelOps(e, opName)
	s := e.NewSession()
	defer s.Close()
	toks := tokens(prompt, tok)
	if _, err := s.Prefill(toks, false); err != nil {
		return nil, err
	}
	type acc struct {
		calls int
		d     time.Duration
		bytes float64
	}
	by := map[string]*acc{}
	keys := prompt + 1 // positions the step's row attends to
	pr.SetProfile(func(op *model.Op, d time.Duration) {
		name := opName(op)
		a := by[name]
		if a == nil {
			a = &acc{}
			by[name] = a
		}
		a.calls++
		a.d += d
		a.bytes += float64(op.WeightBytes + op.BytesPerRow + int64(op.KeysRead(keys))*op.BytesPerKey)
	})
	defer pr.SetProfile(nil)
	for i := 0; i < steps; i++ {
		if _, err := s.Decode(tok()); err != nil {
			return nil, err
		}
		keys++
	}
	var total time.Duration
	for _, a := range by {
		total += a.d
	}
	out := make([]OpTime, 0, len(by))
	for name, a := range by {
		ms := a.d.Seconds() * 1e3 / float64(steps)
		o := OpTime{Name: name, Calls: float64(a.calls) / float64(steps), MS: ms, MB: a.bytes / 1e6 / float64(steps),
			ModelMS: modelled[name][0], FloorMS: modelled[name][1]}
		if total > 0 {
			o.Share = float64(a.d) / float64(total)
		}
		if ms > 0 {
			o.GBs = o.MB / ms
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MS > out[j].MS })
	return out, nil
}

// modelOps is the static model's predicted time and floor, in ms, of each kind of op in one
// decode step (one row, one output row) of e, on perf.DefaultCard; nil when e's executor cannot
// list its launches or a launch has no model.
func modelOps(e *engine.Engine, name func(*model.Op) string) map[string][2]float64 {
	ex, ok := e.Executor().(*exec.Executor)
	if !ok {
		return nil
	}
	ls, err := ex.Lower(1, 1)
	if err != nil {
		return nil
	}
	out := map[string][2]float64{}
	for _, l := range ls {
		pr, err := perf.Predict(perf.Cards[perf.DefaultCard], l.Kernel, l.Args)
		if err != nil {
			return nil
		}
		v := out[name(l.Op)]
		out[name(l.Op)] = [2]float64{v[0] + pr.TimeUS/1e3, v[1] + pr.FloorUS/1e3}
	}
	return out
}
