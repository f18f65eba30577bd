package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"verity/device"
	"verity/device/perf"
	"verity/host/treeverify"
	"verity/megakernel"
)

// Seed001Options choose how the seed's protocol runs (Seed001).
type Seed001Options struct {
	Config     treeverify.Config // the model's shape (treeverify.Seed001 for the seed's own)
	MaxSeq     int               // the cache's capacity
	Calls      int               // verify calls after the committed history (default 8)
	DecodeRuns int               // calls whose every node is also decoded along its path (default 1)
	Backend    device.Backend
	Megakernel bool
	SMs        int
	// WeightSeed draws the weights and the history's tokens; TreeSeed the trees and their
	// tokens. The protocol's trees come from a seed the model does not see: Seed001 draws
	// TreeSeed at random when it is 0, and reports it.
	WeightSeed, TreeSeed uint64
	Bandwidth            float64 // bytes per second the floor is measured against
	// Progress, if set, hears what is being done (building, prefilling, each call).
	Progress func(string)
}

// Seed001Call is one verify call of the protocol.
type Seed001Call struct {
	Pos    int     `json:"pos"`
	US     float64 `json:"us"`     // the timed VerifyStep, start to finished on the device
	Error  float64 `json:"error"`  // relative Frobenius error of all 8 × vocab logits
	Depths []int64 `json:"depths"` // the tree's depths, node by node
	// Wrong are the seed's wrong variants' errors through the same grader, by name.
	Wrong map[string]float64 `json:"wrong"`
	// DecodeEqual is how many of the eight nodes' rows were bit-identical to decoding their
	// paths (-1: not checked in this call).
	DecodeEqual int `json:"decode_equal"`
}

// Seed001Result is the protocol's outcome.
type Seed001Result struct {
	Config     treeverify.Config `json:"config"`
	MaxSeq     int               `json:"max_seq"`
	Backend    string            `json:"backend"`
	Megakernel bool              `json:"megakernel"`
	SMs        int               `json:"sms,omitempty"`
	TreeSeed   uint64            `json:"tree_seed"`
	Calls      []Seed001Call     `json:"calls"`
	// US is the median call after the first (which may build schedules, load modules);
	// FirstUS the first.
	US          float64 `json:"us_per_call"`
	FirstUS     float64 `json:"first_us"`
	PositionsPS float64 `json:"verified_positions_per_s"` // 8 / US
	Bytes       int64   `json:"bytes_per_call"`           // the weights once and the bf16 history's K/V
	Bandwidth   float64 `json:"bandwidth_bytes_per_s"`
	FloorUS     float64 `json:"floor_us"`  // Bytes at Bandwidth
	OfFloor     float64 `json:"of_floor"`  // FloorUS / US
	MaxError    float64 `json:"max_error"` // the worst call's error
	Tolerance   float64 `json:"tolerance"` // the seed's gate
	Graded      bool    `json:"graded"`    // every call within the gate
	// Wrong are the wrong variants: each one's error over all calls together (one Frobenius
	// norm, as the seed grades one step's rows), the calls that caught it on their own, and
	// the smallest error of one call.
	Wrong       []Seed001Wrong `json:"wrong"`
	WrongCaught bool           `json:"wrong_caught"` // every variant's error over all calls above the gate
	DecodeNodes int            `json:"decode_nodes"` // nodes checked against their paths' decoding
	DecodeEqual int            `json:"decode_equal"` // of which bit-identical
	// With the megakernel: the last call's schedule in the megakernel's cost model (modelled,
	// on the static model's H200: megakernel.Predict with parts timed by the kernels' static
	// model; 0 when the model has no figure), beside the measured US; and the schedules
	// built and patched (exec.Megakernel) over the whole protocol.
	ModelledUS    float64 `json:"modelled_us,omitempty"`
	ModelledFloor float64 `json:"modelled_floor_us,omitempty"` // the schedule's bytes at the card's bandwidth
	Builds        int     `json:"schedules_built,omitempty"`
	Patched       int     `json:"schedules_patched,omitempty"`
	BuildSeconds  float64 `json:"build_seconds"` // BuildModel, the history's prefill and the reference
	Seconds       float64 `json:"seconds"`       // the whole protocol
}

// Seed001Wrong is how the grader saw one wrong variant over the protocol's calls.
type Seed001Wrong struct {
	Name   string  `json:"name"`
	Error  float64 `json:"error"`  // over all calls together
	Caught int     `json:"caught"` // calls whose own error is above the gate
	Min    float64 `json:"min"`    // the smallest error of one call
}

// Passed reports whether the implementation passed: every call within the seed's gate and
// every checked node bit-identical to its path's decoding. Whether the wrong variants were
// caught (WrongCaught) is a property of the grader and of the model's weights, not of the
// implementation: it is reported beside.
func (r *Seed001Result) Passed() bool {
	return r.Graded && r.DecodeEqual == r.DecodeNodes
}

// Seed001 runs the seed's protocol: seed-shaped random bf16 weights; a committed history of
// Config.History random tokens prefilled through the model and rounded to bf16 (the seed's
// cache); then Calls verify calls, each of a fresh random tree at pos = History + 8·call:
// the wrong variants run and graded first, then the tree itself (timed, graded against the
// float64 reference, which advances its own cache), then, in the first DecodeRuns calls, each
// node decoded along its path and compared bit for bit.
func Seed001(o Seed001Options) (*Seed001Result, error) {
	if o.Calls <= 0 {
		o.Calls = 8
	}
	if o.DecodeRuns < 0 || o.DecodeRuns > o.Calls {
		return nil, fmt.Errorf("bench: %d decode-checked calls of %d", o.DecodeRuns, o.Calls)
	}
	if o.MaxSeq < o.Config.History+treeverify.Nodes*o.Calls {
		return nil, fmt.Errorf("bench: a cache of %d positions cannot hold %d committed and %d calls of %d", o.MaxSeq, o.Config.History, o.Calls, treeverify.Nodes)
	}
	if o.TreeSeed == 0 {
		o.TreeSeed = rand.Uint64() | 1
	}
	say := func(f string, a ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(f, a...))
		}
	}
	start := time.Now()
	res := &Seed001Result{Config: o.Config, MaxSeq: o.MaxSeq, Backend: o.Backend.Name(), Megakernel: o.Megakernel,
		TreeSeed: o.TreeSeed, Tolerance: treeverify.Tolerance, Bandwidth: o.Bandwidth}
	grades := make([]treeverify.Grade, len(treeverify.Variants))
	for _, v := range treeverify.Variants {
		res.Wrong = append(res.Wrong, Seed001Wrong{Name: v.String(), Min: math.Inf(1)})
	}
	if o.Megakernel {
		res.SMs = o.SMs
	}
	say("drawing the weights")
	w := treeverify.RandomWeights(o.Config, o.WeightSeed)
	say("building the model")
	m, err := treeverify.BuildModel(w, treeverify.NewKVCache(o.Config, o.MaxSeq), o.Config, o.MaxSeq,
		treeverify.Options{Backend: o.Backend, Megakernel: o.Megakernel, SMs: o.SMs})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	hist := rand.New(rand.NewPCG(o.WeightSeed, 0x5eed))
	say("prefilling %d committed positions", o.Config.History)
	kv, err := m.Prefill(treeverify.RandomTokens(hist, o.Config.History, o.Config.Vocab))
	if err != nil {
		return nil, err
	}
	ref, err := treeverify.NewReference(w, kv, o.Config, o.MaxSeq)
	if err != nil {
		return nil, err
	}
	res.Bytes = m.Bytes
	res.BuildSeconds = time.Since(start).Seconds()
	trees := rand.New(rand.NewPCG(o.TreeSeed, 0x7ee))
	for c := 0; c < o.Calls; c++ {
		pos := o.Config.History + treeverify.Nodes*c
		tree := treeverify.RandomTree(trees)
		tokens := treeverify.RandomTokens(trees, treeverify.Nodes, o.Config.Vocab)
		say("call %d of %d at %d: the reference", c+1, o.Calls, pos)
		want, err := ref.Step(tokens, tree, pos, treeverify.Correct)
		if err != nil {
			return nil, err
		}
		call := Seed001Call{Pos: pos, Depths: slices.Clone(tree.Depth[:]), Wrong: map[string]float64{}, DecodeEqual: -1}
		for vi, v := range treeverify.Variants {
			l, err := m.Step(tokens, tree, pos, v)
			if err != nil {
				return nil, err
			}
			rows, err := l.Read()
			if err != nil {
				return nil, err
			}
			e := treeverify.RelError(rows, want)
			call.Wrong[v.String()] = e
			grades[vi].Add(rows, want)
			wv := &res.Wrong[vi]
			wv.Min = math.Min(wv.Min, e)
			if e > treeverify.Tolerance {
				wv.Caught++
			}
		}
		mask := make([][]bool, treeverify.Nodes)
		for i := range mask {
			mask[i] = tree.Mask[i][:]
		}
		say("call %d of %d at %d: the tree", c+1, o.Calls, pos)
		t0 := time.Now()
		l, err := m.VerifyStep(tokens, mask, tree.Depth[:], pos)
		if err != nil {
			return nil, err
		}
		call.US = float64(time.Since(t0).Nanoseconds()) / 1e3
		rows, err := l.Read()
		if err != nil {
			return nil, err
		}
		call.Error = treeverify.RelError(rows, want)
		res.MaxError = math.Max(res.MaxError, call.Error)
		if c < o.DecodeRuns {
			call.DecodeEqual = 0
			for i := 0; i < treeverify.Nodes; i++ {
				got, err := m.DecodePath(tokens, tree, pos, i)
				if err != nil {
					return nil, err
				}
				if slices.Equal(device.F32Bytes(got), device.F32Bytes(rows[i])) {
					call.DecodeEqual++
				}
			}
			res.DecodeNodes += treeverify.Nodes
			res.DecodeEqual += call.DecodeEqual
		}
		res.Calls = append(res.Calls, call)
	}
	res.FirstUS = res.Calls[0].US
	var us []float64
	for _, c := range res.Calls[min(1, len(res.Calls)-1):] {
		us = append(us, c.US)
	}
	sort.Float64s(us)
	res.US = us[len(us)/2]
	res.PositionsPS = treeverify.Nodes / (res.US / 1e6)
	if o.Bandwidth > 0 {
		res.FloorUS = float64(res.Bytes) / o.Bandwidth * 1e6
		res.OfFloor = res.FloorUS / res.US
	}
	res.Graded, res.WrongCaught = res.MaxError <= treeverify.Tolerance, true
	for i := range res.Wrong {
		res.Wrong[i].Error = grades[i].Error()
		res.WrongCaught = res.WrongCaught && res.Wrong[i].Error > treeverify.Tolerance
	}
	if mk := m.Megakernel(); mk != nil {
		res.Builds, res.Patched = mk.Builds, mk.Patched
		if mk.Last != nil {
			c := perf.Cards[perf.DefaultCard]
			mc := megakernel.MachineFor(c)
			qps := (len(mk.Last.Queues) + mc.SMs - 1) / mc.SMs
			if p, err := megakernel.Predict(mk.Last, mc, qps, megakernel.NewKernelModel(c)); err == nil {
				res.ModelledUS, res.ModelledFloor = p.US, p.FloorUS
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
