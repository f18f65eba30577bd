package plan

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/engine"
	"verity/host/machine"
	"verity/host/model"
	"verity/host/quant"
	"verity/repack"
)

// Workload is what the predicted rates are for: verity bench's defaults.
type Workload struct {
	Prompt    int // prefill tokens (128)
	Decode    int // decoded tokens after them (32): decode is predicted at the mean depth
	TreeNodes int // nodes of a verified tree after the prompt and decoded tokens (8)
}

func (w *Workload) defaults() {
	if w.Prompt == 0 {
		w.Prompt = 128
	}
	if w.Decode == 0 {
		w.Decode = 32
	}
	if w.TreeNodes == 0 {
		w.TreeNodes = 8
	}
}

// Prediction is the rates a plan expects, for a workload.
type Prediction struct {
	Workload   Workload `json:"workload"`
	DecodeTPS  float64  `json:"decode_tok_s"`
	PrefillTPS float64  `json:"prefill_tok_s"`
	VerifyUS   float64  `json:"verify_us_per_tree"`
	// Bound is what limits decoding: "compute" (the twin's kernels), "memory" (bandwidth),
	// "disk" (streamed weights), "launches" (per-op overhead).
	Bound string `json:"bound"`
	// Modelled marks a prediction from datasheet-like figures rather than kernels measured
	// here (a GPU: its measured copy bandwidth and a launch cost, no kernel timed).
	Modelled bool `json:"modelled"`
	// How says what the prediction was computed from.
	How []string `json:"how"`
}

// Predict adds the predicted decode, prefill and verify rates to the plan, for workload w on
// threads CPU threads (the twin) or the plan's GPUs. On the CPU twin they come from kernels
// timed here: each matrix shape of the Program at the step's rows (in host memory when the
// model is larger than the caches, repeatedly in cache otherwise), and the other ops and the
// launch cost from a profiled step of a small synthetic model with the same attention shape;
// streamed weights add their bytes at the disk's measured read speed, overlapped with compute
// by the prefetcher. Measurements are cached in m (per build and machine).
func (pl *Plan) Predict(m *machine.Machine, threads int, w Workload) error {
	w.defaults()
	lp := pl.load
	if lp == nil {
		return fmt.Errorf("plan: no load to predict")
	}
	gpu := false
	for _, st := range pl.Stages {
		gpu = gpu || st.GPU
	}
	var pr *Prediction
	var err error
	if gpu {
		pr, err = predictGPU(pl, m, w)
	} else {
		pr, err = predictTwin(pl, m, threads, w)
	}
	if err != nil {
		return err
	}
	pl.Predicted = pr
	return nil
}

// step is one kind of step the workload runs: rows at given depths (keys per row), and how
// many rows want logits.
type step struct {
	rows, keys, outs int
}

// twinCost times ops on the CPU twin.
type twinCost struct {
	m       *machine.Machine
	threads int
	dram    bool  // the model's matrices do not fit the caches: time them from host memory
	set     int64 // the bytes of the matrices a step reads (in device layout): the working set
	misc    *miscTimes
	p       *model.Program
}

// synthNote says what else of the target the synthetic model has: its width where that is not
// its heads', a hybrid's GDN layer.
func synthNote(p *model.Program) string {
	sh := synthShape(p)
	var also []string
	if sh.embd > 0 {
		also = append(also, fmt.Sprintf("the target's width (%d)", sh.embd))
	}
	if sh.gdn.D > 0 {
		also = append(also, "a Gated DeltaNet layer of the target's shape")
	}
	if len(also) == 0 {
		return ""
	}
	return ", at " + strings.Join(also, " and ")
}

// predictTwin predicts the CPU twin's rates.
func predictTwin(pl *Plan, m *machine.Machine, threads int, w Workload) (*Prediction, error) {
	lp := pl.load
	p := lp.Program
	if threads <= 0 {
		threads = m.CPU.GoMaxProcs
	}
	snap := m.Snapshot()
	var matrixBytes int64
	for _, name := range matrixNames(p) {
		t := p.Tensors[name]
		if l, err := repack.NewLayout(t.Type, t.Dims); err == nil {
			matrixBytes += l.Size()
		}
	}
	// the caches the twin's threads have: the shared L3 and the L2 of each core they run on
	cores := threads
	if pc := snap.CPU.PhysicalCores; pc > 0 {
		cores = min(cores, pc)
	}
	llc := snap.CPU.L3Bytes + int64(cores)*snap.CPU.L2Bytes
	if llc <= 0 {
		llc = 32 << 20
	}
	tc := &twinCost{m: m, threads: threads, dram: matrixBytes > llc/2, set: matrixBytes, p: p}
	var err error
	if tc.misc, err = measureMisc(m, threads, p); err != nil {
		return nil, err
	}
	pr := &Prediction{Workload: w}
	where := "in the caches: the matrices fit them"
	if tc.dram {
		where = "from host memory: the matrices are larger than the caches"
	}
	pr.How = append(pr.How, fmt.Sprintf("every matrix shape of the Program timed on the twin's kernels with %d threads among copies as large as the model's %s of matrices (%s), at 1, %d and %d rows",
		threads, machine.HumanBytes(matrixBytes), where, w.TreeNodes, lp.Options.MaxRows),
		fmt.Sprintf("the other ops, and the step's own cost beyond its ops (%.0f µs a decode step), timed in steps of a small synthetic model with the same attention shape%s", tc.misc.step[1]*1e6, synthNote(p)))
	depth := w.Prompt + w.Decode/2
	dec, err := tc.stepTime(step{rows: 1, keys: depth + 1, outs: 1})
	if err != nil {
		return nil, err
	}
	// prefill: chunks of MaxRows, each row attending to the positions before it
	var pre float64
	chunk := lp.Options.MaxRows
	for at := 0; at < w.Prompt; at += chunk {
		n := min(chunk, w.Prompt-at)
		outs := 0
		if at+n == w.Prompt {
			outs = 1
		}
		t, err := tc.stepTime(step{rows: n, keys: n*at + n*(n+1)/2, outs: outs})
		if err != nil {
			return nil, err
		}
		pre += t
	}
	nodes := w.TreeNodes
	ver, err := tc.stepTime(step{rows: nodes, keys: nodes * (w.Prompt + w.Decode + 2), outs: nodes})
	if err != nil {
		return nil, err
	}
	pr.Bound = "compute"
	if tc.dram {
		pr.Bound = "memory"
	}
	if dec > 0 && tc.misc.launch*float64(len(p.Ops)) > dec/2 {
		pr.Bound = "launches"
	}
	// streamed weights: each step reads them from the disk, overlapped with compute when the
	// prefetcher runs
	if sb := pl.Weights.StreamedBytes; pl.Weights.Streaming && sb > 0 {
		d, err := m.ReadSpeed(pl.load.Weights.Packed)
		if err != nil || d.BytesPerSec <= 0 {
			if path := pl.packedSource(); path != "" {
				d, err = m.ReadSpeed(path)
			}
		}
		if err == nil && d.BytesPerSec > 0 {
			// the prefetcher reads the next layers in large reads, overlapped with compute;
			// without it the step faults the pages in (the disk's fault rate), and waits
			rate, how := d.BytesPerSec, "as the prefetcher reads"
			off := pl.load.Options.Prefetch == engine.PrefetchOff
			if off && d.FaultBytesPerSec > 0 {
				rate, how = d.FaultBytesPerSec, "as page faults read"
			}
			disk := float64(sb) / rate
			add := func(t float64) float64 {
				if off {
					return t + disk
				}
				return max(t, disk)
			}
			if disk > dec {
				pr.Bound = "disk"
			}
			dec, ver = add(dec), add(ver)
			pre2 := 0.0
			for at := 0; at < w.Prompt; at += chunk {
				pre2 += disk
			}
			pre = max(pre, pre2)
			pr.How = append(pr.How, fmt.Sprintf("%s of streamed weights a step at the disk's %.0f MB/s (%s; %s)", machine.HumanBytes(sb), rate/1e6, how, d.Method))
		}
	}
	pr.DecodeTPS = 1 / dec
	pr.PrefillTPS = float64(w.Prompt) / pre
	pr.VerifyUS = ver * 1e6
	return pr, nil
}

// packedSource is the model file a plan's packed file is beside ("" if unknown).
func (pl *Plan) packedSource() string {
	if p := pl.load.Weights.Packed; strings.HasSuffix(p, ".packed") {
		return strings.TrimSuffix(p, ".packed")
	}
	return ""
}

// matrixNames are the Program's matrices.
func matrixNames(p *model.Program) []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range p.Ops {
		for _, w := range []string{op.Weight, op.Weight2} {
			if w == "" || seen[w] {
				continue
			}
			switch op.Kind {
			case model.OpMatVec, model.OpMoEMatVec, model.OpMoEGateUp, model.OpMoEDown:
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// stepTime is the predicted time of one step of s.rows rows on the twin: the sum over the
// Program's ops (those of the output head only for the rows that want logits).
func (tc *twinCost) stepTime(s step) (float64, error) {
	var t float64
	for i := range tc.p.Ops {
		op := &tc.p.Ops[i]
		rows := s.rows
		if outHead(tc.p, i) {
			if s.outs == 0 {
				continue
			}
			rows = s.outs
		}
		d, err := tc.opTime(op, rows, s.keys*rows/max(1, s.rows))
		if err != nil {
			return 0, err
		}
		t += d
	}
	return t + tc.misc.stepCost(s.rows), nil
}

// outHead reports whether op i is part of the output head (after the last layer's ops), which
// runs only on the rows that want logits.
func outHead(p *model.Program, i int) bool {
	for j := i; j < len(p.Ops); j++ {
		if strings.HasPrefix(p.Ops[j].Name, "blk.") {
			return false
		}
	}
	return i > 0 && !strings.HasPrefix(p.Ops[i].Name, "blk.") && p.Ops[i].Kind != model.OpEmbed
}

// opTime is one op's predicted time for rows rows attending to keys keys in all.
func (tc *twinCost) opTime(op *model.Op, rows, keys int) (float64, error) {
	switch op.Kind {
	case model.OpMatVec:
		t := tc.p.Tensors[op.Weight]
		return tc.matvec(t.Type, op.Rows, op.Cols, rows)
	case model.OpMoEMatVec, model.OpMoEGateUp, model.OpMoEDown:
		if _, ok := tc.misc.kinds[op.Kind.String()]; ok {
			// timed in the synthetic model's experts, scaled by the bytes a row reads
			return tc.misc.other(op, rows), nil
		}
		// each slot is a row of one of the Used experts it was routed to; an expert read by
		// several slots is read once for all of them
		t := tc.p.Tensors[op.Weight]
		experts := max(1, op.Experts)
		if len(t.Dims) > 2 {
			experts = int(t.Dims[2])
		}
		outRows, cols := int(t.Dims[1]), int(t.Dims[0])
		slots := rows * max(1, op.Used)
		distinct := min(experts, slots)
		per := (slots + distinct - 1) / distinct
		d, err := tc.matvec(t.Type, outRows, cols, per)
		if err != nil {
			return 0, err
		}
		if op.Kind == model.OpMoEGateUp {
			d *= 2 // the gate and the up experts
		}
		return float64(distinct) * d, nil
	case model.OpAttention:
		return tc.misc.attention(rows, keys, op), nil
	}
	return tc.misc.other(op, rows), nil
}

// rowClass is the activation rows a matvec is timed at: 1, up to 8 (one pass over the
// weights for the vector kernels), or a whole step.
func rowClass(n int) int {
	switch {
	case n <= 1:
		return 1
	case n <= 8:
		return 8
	}
	return 64
}

// matvec is the time of one matvec of a rows × cols matrix of type t on n activation rows.
func (tc *twinCost) matvec(t dtype.Type, rows, cols, n int) (float64, error) {
	c := rowClass(n)
	// large matrices are timed at a slice of their rows: the time is proportional to rows
	rowBytes, err := t.RowBytes(int64(cols))
	if err != nil {
		return 0, err
	}
	timed := rows
	if limit := int(int64(32<<20) / max(1, rowBytes)); timed > limit {
		timed = max(64, limit/64*64)
	}
	set := int64(1) << min(40, bits.Len64(uint64(max(1, tc.set-1)))) // the working set, to a power of two
	key := fmt.Sprintf("matvec %s %dx%d n%d t%d set%d", t, timed, cols, c, tc.threads, set>>20)
	s, err := tc.m.Rate(key, func() (float64, error) { return timeMatVec(tc.m, tc.threads, t, timed, cols, c, set) })
	if err != nil {
		return 0, err
	}
	s *= float64(rows) / float64(timed)
	if n == c || n <= 1 {
		return s, nil
	}
	// rows between two classes: between their times, in proportion
	lo := 1
	if c == 64 {
		lo = 8
	}
	sl, err := tc.matvec(t, rows, cols, lo)
	if err != nil {
		return 0, err
	}
	return sl + (s-sl)*float64(n-lo)/float64(c-lo), nil
}

// timeMatVec times the twin's matvec of a rows × cols matrix of type t on n activation rows
// with threads workers: a typical launch (the least of five rounds' medians), round robin over enough copies of the
// matrix to fill set bytes (at most 256 MiB, and an eighth of the memory budget), so that each
// launch finds its matrix where the model's would be — in a cache, or in memory. The matrix is
// one quantised row of random values, repeated (the kernels' time does not depend on them).
func timeMatVec(m *machine.Machine, threads int, t dtype.Type, rows, cols, n int, set int64) (float64, error) {
	f, err := kernels.Lookup(t)
	if err != nil {
		return 0, err
	}
	q, err := quant.Lookup(t)
	if err != nil {
		return 0, err
	}
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	vals := make([]float32, cols)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * 0.05)
	}
	rb, _ := t.RowBytes(int64(cols))
	row := make([]byte, rb)
	q.Quantize(row, vals)
	data := make([]byte, int64(rows)*rb)
	for i := 0; i < rows; i++ {
		copy(data[int64(i)*rb:], row)
	}
	pk, err := repack.Pack(t, []int64{int64(cols), int64(rows)}, data)
	if err != nil {
		return 0, err
	}
	data = nil
	size := int64(len(pk.Data))
	set = min(set, 256<<20)
	if b := m.Budget() / 8; b > 0 {
		set = min(set, b)
	}
	copies := int(min(256, max(1, (set+size-1)/size)))
	b := cpu.New(threads)
	defer b.Close()
	ws := make([]device.Ptr, copies)
	for i := range ws {
		buf := pk.Data
		if i > 0 {
			buf = slices.Clone(pk.Data)
		}
		p, err := b.Upload(buf)
		if err != nil {
			return 0, err
		}
		ws[i] = p
	}
	x, err := b.Alloc(int64(f.Act.RowBytes(cols)) * int64(n))
	if err != nil {
		return 0, err
	}
	// (the activations stay zero: the kernels' time does not depend on them either)
	y, err := b.Alloc(int64(rows) * int64(n) * 4)
	if err != nil {
		return 0, err
	}
	k, err := kernels.MatVecFor(t, n)
	if err != nil {
		return 0, err
	}
	launch := func(i int) error {
		return b.Launch(k, kernels.MatVecArgs{W: ws[i%copies], X: x, Y: y, Rows: int32(rows), Cols: int32(cols), N: int32(n)})
	}
	for i := 0; i < copies; i++ { // warm up: every copy once
		if err := launch(i); err != nil {
			return 0, err
		}
	}
	// five rounds of launches, apart: the least of the rounds' median launches counts (a
	// step's launches take a typical time, not the fastest; a round the machine's other work
	// disturbed does not count)
	rounds := map[int][]float64{}
	for round := 0; round < 5; round++ {
		budget := time.Now().Add(40 * time.Millisecond)
		for i := 0; i < 3 || i < 50 && time.Now().Before(budget); i++ {
			start := time.Now()
			if err := launch(i); err != nil {
				return 0, err
			}
			rounds[round] = append(rounds[round], time.Since(start).Seconds())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return leastMedian(rounds), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

// predictGPU models the rates on GPUs from their measured copy bandwidth: each step moves the
// cost model's bytes (weights once, activations per row, K/V per key) at that rate, and each op
// costs a launch. No kernel is timed: the figures are modelled.
func predictGPU(pl *Plan, m *machine.Machine, w Workload) (*Prediction, error) {
	p := pl.load.Program
	pr := &Prediction{Workload: w, Modelled: true, Bound: "memory"}
	bw := math.Inf(1)
	for _, st := range pl.Stages {
		g, ok := m.GPU(st.Backend)
		if !ok || g.CopyBytesPerSec <= 0 {
			return nil, fmt.Errorf("plan: %s has no measured bandwidth (verity info measures it)", st.Backend)
		}
		bw = min(bw, g.CopyBytesPerSec/2) // a copy moves each byte twice
	}
	const launch = 5e-6 // a kernel launch and its gap, eager: a modelled figure
	stepTime := func(rows, keys, outs int) float64 {
		var bytes int64
		for i, op := range p.Ops {
			r := rows
			if outHead(p, i) {
				r = outs
				if r == 0 {
					continue
				}
			}
			bytes += op.WeightBytes + int64(r)*op.BytesPerRow + int64(keys*r/max(1, rows))*op.BytesPerKey
		}
		return float64(bytes)/bw + launch*float64(len(p.Ops))
	}
	depth := w.Prompt + w.Decode/2
	pr.DecodeTPS = 1 / stepTime(1, depth+1, 1)
	var pre float64
	chunk := pl.load.Options.MaxRows
	for at := 0; at < w.Prompt; at += chunk {
		n := min(chunk, w.Prompt-at)
		outs := 0
		if at+n == w.Prompt {
			outs = 1
		}
		pre += stepTime(n, n*at+n*(n+1)/2, outs)
	}
	pr.PrefillTPS = float64(w.Prompt) / pre
	pr.VerifyUS = 1e6 * stepTime(w.TreeNodes, w.TreeNodes*(w.Prompt+w.Decode+2), w.TreeNodes)
	pr.How = append(pr.How, fmt.Sprintf("modelled: the cost model's bytes at the devices' measured copy rate (%.0f GB/s read), %.0f µs a launch", bw/1e9, launch*1e6))
	return pr, nil
}
