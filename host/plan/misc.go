package plan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"time"

	"verity/device/cpu"
	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/machine"
	"verity/host/model"
)

// miscTimes are the twin's times of the ops other than the matrices', measured in a profiled
// step of a small synthetic model (one layer, the target's attention shape and dominant weight
// type): per kind of op and row class, its time and its bytes per row (to scale to the
// target's widths), a launch's cost, and attention's cost per key.
type miscTimes struct {
	launch   float64                   // the cheapest op's time: a launch and almost no work
	kinds    map[string]map[int]opTime // kind → row class → time
	attnA    map[int]float64           // attention's fixed cost per row class
	attnB    float64                   // attention's cost per key (all heads of a layer)
	copyRate float64                   // host copy bandwidth, bytes/s (kinds not measured)
	// step is a step's own cost beyond its ops' (the engine's and the executor's work around
	// them: slot tables, inputs, the logits), by row class
	step map[int]float64
}

// stepCost is a step's own cost for rows rows.
func (mt *miscTimes) stepCost(rows int) float64 { return mt.step[rowClass(rows)] }

type opTime struct{ secs, bytesPerRow float64 }

// shape is the synthetic model's shape for a target Program: its attention heads, its most
// common matrix type, for a mixture of experts the experts (at most 16), how many a token
// uses and their feed-forward width (narrowed to keep the experts under 32 MB), and for a
// hybrid (qwen35moe) its Gated DeltaNet geometry and RoPE dims, so that the GDN ops are timed
// at the target's own shape.
type shape struct {
	heads, kvHeads, headDim int
	t                       dtype.Type
	experts, used, ff       int
	gdn                     model.GDNShape
	nrot                    int
	embd                    int // the target's width where it is not heads × head size (else 0)
}

func (s shape) String() string {
	k := fmt.Sprintf("%s h%d/%d d%d", s.t, s.heads, s.kvHeads, s.headDim)
	if s.experts > 0 {
		k += fmt.Sprintf(" moe%d/%d ff%d", s.experts, s.used, s.ff)
	}
	if s.gdn.D > 0 {
		k += fmt.Sprintf(" gdn%d/%d d%d k%d rot%d", s.gdn.NK, s.gdn.NV, s.gdn.D, s.gdn.K, s.nrot)
	}
	if s.embd > 0 {
		k += fmt.Sprintf(" e%d", s.embd)
	}
	return k
}

func synthShape(p *model.Program) shape {
	heads, kvHeads, headDim, t := synthAttention(p)
	s := shape{heads: heads, kvHeads: kvHeads, headDim: headDim, t: t}
	for _, op := range p.Ops {
		if op.Kind == model.OpMoEGateUp && op.Experts > 0 {
			s.experts, s.used, s.ff = min(16, op.Experts), min(op.Used, 16), op.Rows
			break
		}
	}
	for _, op := range p.Ops {
		switch {
		case op.Kind == model.OpGDNScan && s.gdn.D == 0:
			s.gdn = op.GDN
		case op.Kind == model.OpRope && s.nrot == 0:
			s.nrot = op.NRot
		case op.Kind == model.OpEmbed && s.embd == 0 && op.Cols != heads*headDim:
			s.embd = op.Cols
		}
	}
	if s.gdn.D > 0 && s.experts == 0 { // a hybrid always has experts; one of the width's own if not
		s.experts, s.used, s.ff = 1, 1, 256
	}
	if s.experts > 0 {
		s.used = min(s.used, s.experts)
		bpp := float64(t.BlockBytes()) / float64(t.BlockSize())
		for s.ff > 256 && float64(s.experts)*3*float64(heads*headDim)*float64(s.ff)*bpp > 32<<20 {
			s.ff /= 2
		}
		s.ff = max(256, s.ff/256*256)
	}
	return s
}

// synthAttention is the target's attention shape and most common matrix type.
func synthAttention(p *model.Program) (heads, kvHeads, headDim int, t dtype.Type) {
	heads, kvHeads, headDim = 8, 2, 32
	for _, op := range p.Ops {
		if op.Kind == model.OpAttention {
			heads, kvHeads, headDim = op.Heads, op.KVHeads, op.HeadDim
			break
		}
	}
	bytesOf := map[dtype.Type]int64{}
	for _, name := range matrixNames(p) {
		bytesOf[p.Tensors[name].Type] += int64(len(p.Tensors[name].Data))
	}
	t = dtype.F32
	for ty, n := range bytesOf {
		if n > bytesOf[t] || bytesOf[t] == 0 {
			t = ty
		}
	}
	return heads, kvHeads, headDim, t
}

// measureMisc measures (or takes from m's cache) the synthetic model's op times.
func measureMisc(m *machine.Machine, threads int, p *model.Program) (*miscTimes, error) {
	sh := synthShape(p)
	group := fmt.Sprintf("misc %s t%d", sh, threads)
	vs, err := m.RateGroup(group, func() (map[string]float64, error) { return profileSynthetic(threads, sh) })
	if err != nil {
		return nil, err
	}
	mt := &miscTimes{launch: vs["launch"], kinds: map[string]map[int]opTime{}, attnA: map[int]float64{}, attnB: vs["attention b"],
		copyRate: m.CopyBandwidth(threads), step: map[int]float64{}}
	for k, v := range vs {
		var kind string
		var class int
		if n, _ := fmt.Sscanf(k, "time %s %d", &kind, &class); n == 2 {
			ot := mt.kinds[kind]
			if ot == nil {
				ot = map[int]opTime{}
				mt.kinds[kind] = ot
			}
			ot[class] = opTime{secs: v, bytesPerRow: vs[fmt.Sprintf("bytes %s %d", kind, class)]}
		}
		if n, _ := fmt.Sscanf(k, "attention a %d", &class); n == 1 {
			mt.attnA[class] = v
		}
		if n, _ := fmt.Sscanf(k, "step %d", &class); n == 1 {
			mt.step[class] = v
		}
	}
	return mt, nil
}

// kindOf names an op's kind for the profile: its kind, and for an embedding its weight type.
func kindOf(op *model.Op, p *model.Program) string {
	if op.Kind == model.OpEmbed {
		return "embed-" + p.Tensors[op.Weight].Type.String()
	}
	return op.Kind.String()
}

// profileSynthetic builds the synthetic model, runs profiled steps of 64 rows (a prefill
// chunk), 8 (a tree) and 1 (decoding, at two depths), and returns per kind and row class the
// median op time and bytes per row, the cheapest op's time, and attention's cost per key and
// fixed cost per row class.
func profileSynthetic(threads int, sh shape) (map[string]float64, error) {
	t := sh.t
	spec := fixtures.Spec{Name: "plan-probe", Arch: "llama", NLayer: 1, NEmbd: sh.heads * sh.headDim, NFF: 256, NHead: sh.heads,
		NHeadKV: sh.kvHeads, HeadDim: sh.headDim, NVocab: 512, NCtx: 1024, RopeBase: 10000, Eps: 1e-5, Seed: 5,
		FileType: fixtures.FileF32, Types: fixtures.Pure(t, 1)}
	if sh.embd > 0 {
		// the target's own width (a llama's is its heads'; a qwen3's need not be), so that its
		// small experts and other ops are timed at it: they cost a launch more than their
		// bytes, so their times do not scale with the width
		spec.Arch, spec.NEmbd = "qwen3", sh.embd
		if sh.experts > 0 {
			spec.Arch = "qwen3moe"
		}
	}
	if sh.experts > 0 { // Mixtral-style: the target's experts, as many used
		spec.Experts, spec.ExpertsUsed, spec.NFF = sh.experts, sh.used, sh.ff
	}
	if g := sh.gdn; g.D > 0 { // a hybrid: a GDN layer and an attention layer, the target's GDN shape
		nrot := max(2, sh.nrot) &^ 1
		spec.Arch, spec.NLayer, spec.Experts, spec.ExpertsUsed = "qwen35moe", 2, 0, 0
		spec.Hybrid = fixtures.Hybrid{FullAttnInterval: 2, NRot: nrot, RopeSections: [4]int{nrot / 2}, NExpert: sh.experts,
			NExpertUsed: sh.used, NFFShared: sh.ff, ConvKernel: g.K, StateSize: g.D, NKHead: g.NK, NVHead: g.NV}
		spec.Types = fixtures.Pure(t, spec.NLayer)
	}
	if ft, err := fixtures.FileTypeOf(t); err == nil {
		spec.FileType = ft
	}
	var buf bytes.Buffer
	if _, err := fixtures.WriteTo(&buf, spec, nil); err != nil {
		return nil, fmt.Errorf("plan: the synthetic model: %w", err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, err
	}
	mdl, err := engine.FromFile(f, cpu.New(threads), engine.LoadOptions{MaxRows: 64, Context: 1024, Budget: -1})
	if err != nil {
		return nil, fmt.Errorf("plan: the synthetic model: %w", err)
	}
	defer mdl.Close()
	ex, ok := mdl.Engine.Executor().(*exec.Executor)
	if !ok {
		return nil, fmt.Errorf("plan: the synthetic model's executor is a %T", mdl.Engine.Executor())
	}
	p := mdl.Program()
	type sample struct {
		kind  string
		class int
		secs  float64
		bytes float64
		round int
	}
	round := 0
	var samples []sample
	class := 0
	var opsTime float64 // every op's time in the current step, matrices' too
	ex.SetProfile(func(op *model.Op, d time.Duration) {
		opsTime += d.Seconds()
		if class == 0 || op.Kind == model.OpMatVec {
			return
		}
		k := kindOf(op, p)
		samples = append(samples, sample{k, class, d.Seconds(), float64(op.BytesPerRow), round})
	})
	r := rand.New(rand.NewPCG(1, 2))
	toks := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(spec.NVocab))
		}
		return out
	}
	s := mdl.NewSession()
	defer func() { s.Close() }()
	var attn [][4]float64                   // class, keys, seconds, round
	steps := map[string]map[int][]float64{} // class → round → a step's time less its ops'
	run := func(c int, f func() error) error {
		class, opsTime = c, 0
		start := len(samples)
		t0 := time.Now()
		err := f()
		wall := time.Since(t0).Seconds()
		class = 0
		ops := opsTime
		k := fmt.Sprint(c)
		if steps[k] == nil {
			steps[k] = map[int][]float64{}
		}
		steps[k][round] = append(steps[k][round], max(0, wall-ops))
		for _, x := range samples[start:] {
			if x.kind == "attention" {
				attn = append(attn, [4]float64{float64(c), 0, x.secs, float64(round)})
			}
		}
		return err
	}
	keysOf := func(depth, rows int) float64 { return float64(rows*depth + rows*(rows+1)/2) }
	// three rounds of each: each round's median, and the least of them counts (the machine
	// may be busy with other work in one of them)
	for round = 0; round < 3; round++ {
		if err := run(64, func() error { _, err := s.Prefill(toks(64), false); return err }); err != nil {
			return nil, err
		}
		setKeys(attn, keysOf(0, 64))
		for range 4 {
			d := s.Len()
			if err := run(1, func() error { _, err := s.Decode(toks(1)[0]); return err }); err != nil {
				return nil, err
			}
			setKeys(attn, keysOf(d, 1))
		}
		d := s.Len()
		tree := engine.Tree{Tokens: toks(8), Parents: []int{-1, 0, 0, 1, 1, 2, 2, 3}}
		if err := run(8, func() error { _, err := s.Verify(tree); return err }); err != nil {
			return nil, err
		}
		setKeys(attn, float64(8*d)+21) // each node's history and its path (1+2+2+3+3+3+3+4)
		class = 0
		for s.Len() < 896 { // deep, for attention's cost per key
			if _, err := s.Prefill(toks(64), false); err != nil {
				return nil, err
			}
		}
		for range 4 {
			d := s.Len()
			if err := run(1, func() error { _, err := s.Decode(toks(1)[0]); return err }); err != nil {
				return nil, err
			}
			setKeys(attn, keysOf(d, 1))
		}
		s.Close()
		s = mdl.NewSession()
	}
	out := map[string]float64{}
	group := map[string]map[int][]float64{} // kind and class → round → times
	bytesOf := map[string]float64{}
	launch := 1.0
	for _, x := range samples {
		k := fmt.Sprintf("%s %d", x.kind, x.class)
		if group[k] == nil {
			group[k] = map[int][]float64{}
		}
		group[k][x.round] = append(group[k][x.round], x.secs)
		bytesOf[k] = x.bytes
		launch = min(launch, x.secs)
	}
	for k, rounds := range group {
		out["time "+k] = leastMedian(rounds)
		out["bytes "+k] = bytesOf[k]
	}
	out["launch"] = launch
	for k, rounds := range steps {
		out["step "+k] = leastMedian(rounds)
	}
	// attention: a + b·keys per row class, b from the one-row steps at two depths
	shallow, deep := map[int][]float64{}, map[int][]float64{}
	var ks, kd []float64
	for _, a := range attn {
		if a[0] != 1 {
			continue
		}
		if a[1] < 512 {
			shallow[int(a[3])] = append(shallow[int(a[3])], a[2])
			ks = append(ks, a[1])
		} else {
			deep[int(a[3])] = append(deep[int(a[3])], a[2])
			kd = append(kd, a[1])
		}
	}
	if len(ks) > 0 && len(kd) > 0 {
		b := max(0, (leastMedian(deep)-leastMedian(shallow))/(median(kd)-median(ks)))
		out["attention b"] = b
		for _, c := range []int{1, 8, 64} {
			as := map[int][]float64{}
			for _, a := range attn {
				if int(a[0]) == c && (c != 1 || a[1] < 512) {
					as[int(a[3])] = append(as[int(a[3])], max(0, a[2]-b*a[1]))
				}
			}
			if len(as) > 0 {
				out[fmt.Sprintf("attention a %d", c)] = leastMedian(as)
			}
		}
	}
	return out, nil
}

// leastMedian is the least of the rounds' medians.
func leastMedian(rounds map[int][]float64) float64 {
	best := -1.0
	for _, ts := range rounds {
		if m := median(ts); best < 0 || m < best {
			best = m
		}
	}
	return best
}

// setKeys gives the attention samples recorded without a key count the step's.
func setKeys(attn [][4]float64, keys float64) {
	for i := range attn {
		if attn[i][1] == 0 {
			attn[i][1] = keys
		}
	}
}

// attention is the predicted time of an attention op over rows rows with keys keys in all.
func (mt *miscTimes) attention(rows, keys int, op *model.Op) float64 {
	a, ok := mt.attnA[rowClass(rows)]
	if !ok {
		a = mt.launch
	}
	return a + mt.attnB*float64(keys)
}

// other is the predicted time of an op that is neither a matrix's nor attention: the
// synthetic model's time of its kind at the row class, scaled by its bytes per row beyond a
// launch; a kind the synthetic model lacks costs a launch and its bytes at the copy rate.
func (mt *miscTimes) other(op *model.Op, rows int) float64 {
	kind := op.Kind.String()
	if op.Kind == model.OpEmbed {
		// the embedding's weight type: the synthetic model's, else any embedding measured
		for k := range mt.kinds {
			if len(k) > 6 && k[:6] == "embed-" {
				kind = k
				break
			}
		}
	}
	bytes := float64(op.WeightBytes) + float64(rows)*float64(op.BytesPerRow)
	if ot, ok := mt.kinds[kind][rowClass(rows)]; ok {
		scale := 1.0
		if ot.bytesPerRow > 0 {
			scale = float64(op.BytesPerRow) / ot.bytesPerRow
		}
		return mt.launch + max(0, ot.secs-mt.launch)*scale*float64(rows)/float64(rowClass(rows))
	}
	return mt.launch + bytes/max(1, mt.copyRate/2)
}
