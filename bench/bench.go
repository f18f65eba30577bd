package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat"

	"verity/device/kernels"
	"verity/host/engine"
	"verity/host/model"
)

// Options choose what to measure.
type Options struct {
	// A repetition prefills Depth tokens untimed, then Prompt tokens timed (0: none), decodes
	// Decode tokens timed after them (0: none) and verifies Trees trees of TreeNodes nodes
	// after those (llama-bench's tests: pp Prompt @ Depth, tg Decode @ Depth+Prompt, pg
	// Prompt+Decode @ Depth, and the tree verify, see Tests).
	Depth     int
	Prompt    int
	Decode    int
	Trees     int // tree verifications per repetition (default 8)
	TreeNodes int // nodes per tree (default 8)
	// Widths, if set, adds the verify cost curve: the median time of a tree of each width
	// (node count), measured Trees times each, so that a drafter can size its trees.
	Widths []int
	Seed   uint64
	// Repetitions is how many times prefill, decode and verify are measured (default 3); the
	// result holds their means, standard deviations and every sample.
	Repetitions int
	// NoWarmup skips the untimed warm-up pass (a short prefill, decode and verify) that first
	// loads — on a GPU, JIT-compiles — every kernel the measured passes run.
	NoWarmup bool
	// Ops, if positive, adds the per-op profile of decoding this many tokens after the prompt
	// (ProfileOps).
	Ops int
	// Spec, if set, adds speculative decoding of Decode tokens with synthetic drafts of these
	// acceptance rates by depth (Speculate).
	Spec []float64
	// Batch, if set, adds decoding Decode tokens in each of so many sessions at once, for each
	// count (DecodeBatch); the engine must hold that many sessions.
	Batch []int
}

// WidthTime is one point of the verify cost curve.
type WidthTime struct {
	Nodes     int     `json:"nodes"`
	MS        float64 `json:"ms"`          // median time of one verify step
	MSPerNode float64 `json:"ms_per_node"` // MS / Nodes
}

// Result is one benchmark row.
type Result struct {
	Model    string  `json:"model"`
	Arch     string  `json:"arch"`
	Backend  string  `json:"backend"`
	Threads  int     `json:"threads"`
	WeightMB float64 `json:"weight_mb"`
	// The K/V cache: its element types, its size and its size as float32 (the memory a 16-bit
	// cache saves).
	CacheK     string  `json:"cache_type_k"`
	CacheV     string  `json:"cache_type_v"`
	CacheMB    float64 `json:"kv_cache_mb"`
	CacheF32MB float64 `json:"kv_cache_f32_mb"`
	// Means over the repetitions, with standard deviations (SD) and every repetition's value.
	PrefillTPS     float64   `json:"prefill_tok_s"`
	PrefillSD      float64   `json:"prefill_tok_s_stddev"`
	PrefillSamples []float64 `json:"prefill_tok_s_samples"`
	DecodeTPS      float64   `json:"decode_tok_s"`
	DecodeTPSSD    float64   `json:"decode_tok_s_stddev"`
	DecodeSamples  []float64 `json:"decode_tok_s_samples"`
	DecodeMS       float64   `json:"decode_ms_per_tok"` // median over every decoded token
	DecodeSD       float64   `json:"decode_ms_stddev"`  // standard deviation of the per-token times
	VerifyMS       float64   `json:"verify_ms_per_tree"`
	VerifySD       float64   `json:"verify_ms_stddev"`
	VerifySamples  []float64 `json:"verify_ms_samples"`
	VerifyTPS      float64   `json:"verify_nodes_s"`
	TreeNodes      int       `json:"tree_nodes"`
	Repetitions    int       `json:"repetitions"`
	Prompt         int       `json:"prompt_tokens"`
	Decoded        int       `json:"decoded_tokens"`
	Depth          int       `json:"depth_tokens,omitempty"` // untimed context before the prompt
	// Each repetition's wall time: the whole prefill, the whole decode, one tree (the mean of
	// the repetition's Trees verifications), in nanoseconds.
	PrefillNS []int64 `json:"prefill_ns_samples,omitempty"`
	DecodeNS  []int64 `json:"decode_ns_samples,omitempty"`
	VerifyNS  []int64 `json:"verify_ns_samples,omitempty"`
	// The cost model's bytes of the whole prefill (in steps of the engine's rows) and of one
	// tree's step.
	PrefillBytes float64 `json:"prefill_bytes,omitempty"`
	VerifyBytes  float64 `json:"verify_bytes,omitempty"`
	// Megakernel: every step ran as one megakernel launch.
	Megakernel bool `json:"megakernel,omitempty"`
	// StepRows is the engine's rows per step: the prefill's chunk (llama.cpp's n_ubatch).
	StepRows int `json:"step_rows,omitempty"`
	// Bytes moved per decoded token (weights + KV cache + activations, from the cost model)
	// at the mean decode context, the achieved rate and its fraction of the probe.
	BytesPerToken float64 `json:"bytes_per_token"`
	DecodeGBs     float64 `json:"decode_gb_s"`
	ProbeGBs      float64 `json:"probe_gb_s"`
	Fraction      float64 `json:"bandwidth_fraction"`
	// Curve is the verify cost curve (Options.Widths).
	Curve []WidthTime `json:"verify_curve,omitempty"`
	// Ops is the per-op decode profile (Options.Ops).
	Ops []OpTime `json:"ops,omitempty"`
	// Spec is speculative decoding with synthetic drafts (Options.Spec).
	Spec *SpecTime `json:"spec,omitempty"`
	// Batch is decoding several sessions at once (Options.Batch).
	Batch []BatchTime `json:"batch,omitempty"`
	Host  Provenance  `json:"host"`
}

// Run measures prefill, decode and verify on engine e (which must have room for the prompt,
// the decoded tokens and one tree).
func Run(e *engine.Engine, name string, probe float64, o Options) (Result, error) {
	if o.Trees == 0 {
		o.Trees = 8
	}
	if o.TreeNodes == 0 {
		o.TreeNodes = 8
	}
	p := e.Program()
	c := p.Config
	kvBytes, kvF32 := e.CacheBytes()
	if o.Depth < 0 || o.Prompt < 0 || o.Decode < 0 {
		return Result{}, fmt.Errorf("bench: depth %d, prompt %d, decode %d: want counts of 0 or more", o.Depth, o.Prompt, o.Decode)
	}
	before := o.Depth + o.Prompt // the context the decode starts at
	if before+o.Decode+o.TreeNodes > e.Context() {
		return Result{}, fmt.Errorf("bench: %d depth + %d prompt + %d decode + %d tree tokens exceed the context of %d", o.Depth, o.Prompt, o.Decode, o.TreeNodes, e.Context())
	}
	for _, w := range append([]int{o.TreeNodes}, o.Widths...) {
		if w < 1 || w > e.MaxRows() {
			return Result{}, fmt.Errorf("bench: tree of %d nodes: want 1 … the step size %d", w, e.MaxRows())
		}
		if before+o.Decode+w > e.Context() {
			return Result{}, fmt.Errorf("bench: %d depth + %d prompt + %d decode + %d tree tokens exceed the context of %d", o.Depth, o.Prompt, o.Decode, w, e.Context())
		}
	}
	// the extras run after a prompt of the depth and the prompt's tokens (at least one)
	extra := max(1, before)
	if o.Ops < 0 || extra+o.Ops > e.Context() {
		return Result{}, fmt.Errorf("bench: a profile of %d decode steps after %d prompt tokens: the context holds %d", o.Ops, extra, e.Context())
	}
	// speculation and batches are measured last: their settings are checked first
	if len(o.Spec) > 0 {
		if extra+o.Decode+len(o.Spec)+1 > e.Context() || o.Decode < 2 || len(o.Spec)+1 > e.MaxRows() {
			return Result{}, fmt.Errorf("bench: speculation of %d tokens after %d, with drafts of %d: want ≥ 2 tokens, drafts of at most %d, and room in the context of %d",
				o.Decode, extra, len(o.Spec), e.MaxRows()-1, e.Context())
		}
		for _, p := range o.Spec {
			if !(p >= 0 && p <= 1) {
				return Result{}, fmt.Errorf("bench: speculation: acceptance rate %v: want 0 … 1", p)
			}
		}
	}
	for _, n := range o.Batch {
		if n < 1 || n > e.MaxRows() || n > e.Sessions() {
			return Result{}, fmt.Errorf("bench: a batch of %d sessions: want 1 … %d (the step size and the sessions the cache holds)", n, min(e.MaxRows(), e.Sessions()))
		}
	}
	if o.Repetitions == 0 {
		o.Repetitions = 3
	}
	if o.Repetitions < 1 {
		return Result{}, fmt.Errorf("bench: %d repetitions", o.Repetitions)
	}
	r := rand.New(rand.NewPCG(o.Seed, 1))
	tok := func() int32 { return int32(r.IntN(c.NVocab)) }
	res := Result{Model: name, Arch: c.Arch, Backend: e.Executor().Name(), TreeNodes: o.TreeNodes,
		WeightMB: float64(p.WeightBytes()) / 1e6, CacheK: p.CacheK.String(), CacheV: p.CacheV.String(),
		CacheMB: float64(kvBytes) / 1e6, CacheF32MB: float64(kvF32) / 1e6, ProbeGBs: probe / 1e9, Repetitions: o.Repetitions,
		Prompt: o.Prompt, Decoded: o.Decode, Depth: o.Depth, StepRows: e.MaxRows(), Host: Host(e.Executor().Name())}

	if !o.NoWarmup {
		if err := warmup(e, tok, o); err != nil {
			return res, fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	var all []float64 // every decoded token's time, ms
	for rep := 0; rep < o.Repetitions; rep++ {
		s := e.NewSession()
		if o.Depth > 0 {
			if _, err := s.Prefill(tokens(o.Depth, tok), false); err != nil {
				s.Close()
				return res, err
			}
		}
		if o.Prompt > 0 {
			prompt := tokens(o.Prompt, tok)
			start := time.Now()
			if _, err := s.Prefill(prompt, false); err != nil {
				s.Close()
				return res, err
			}
			d := time.Since(start)
			res.PrefillNS = append(res.PrefillNS, d.Nanoseconds())
			res.PrefillSamples = append(res.PrefillSamples, float64(o.Prompt)/d.Seconds())
		}

		if o.Decode > 0 {
			start := time.Now()
			for i := 0; i < o.Decode; i++ {
				t0 := time.Now()
				if _, err := s.Decode(tok()); err != nil {
					s.Close()
					return res, err
				}
				all = append(all, 1e3*time.Since(t0).Seconds())
			}
			d := time.Since(start)
			res.DecodeNS = append(res.DecodeNS, d.Nanoseconds())
			res.DecodeSamples = append(res.DecodeSamples, float64(o.Decode)/d.Seconds())
		}

		tree := draftTree(o.TreeNodes, tok)
		start := time.Now()
		for i := 0; i < o.Trees; i++ {
			if _, err := s.Verify(tree); err != nil {
				s.Close()
				return res, err
			}
		}
		d := time.Since(start)
		res.VerifyNS = append(res.VerifyNS, d.Nanoseconds()/int64(o.Trees))
		res.VerifySamples = append(res.VerifySamples, 1e3*d.Seconds()/float64(o.Trees))
		if rep < o.Repetitions-1 {
			s.Close()
			continue
		}
		for _, w := range o.Widths { // the cost curve, once, after the last repetition
			t := draftTree(w, tok)
			ms := make([]float64, o.Trees)
			for i := range ms {
				start := time.Now()
				if _, err := s.Verify(t); err != nil {
					s.Close()
					return res, err
				}
				ms[i] = 1e3 * time.Since(start).Seconds()
			}
			sort.Float64s(ms)
			med := stat.Quantile(0.5, stat.Empirical, ms, nil)
			res.Curve = append(res.Curve, WidthTime{Nodes: w, MS: med, MSPerNode: med / float64(w)})
		}
		s.Close()
	}
	if o.Ops > 0 {
		var err error
		if res.Ops, err = ProfileOps(e, extra, o.Ops, tok); err != nil {
			return res, fmt.Errorf("bench: op profile: %w", err)
		}
	}
	if len(o.Spec) > 0 {
		prompt := tokens(extra, tok)
		st, err := Speculate(e, prompt, o.Decode, o.Spec, o.Seed)
		if err != nil {
			return res, err
		}
		res.Spec = &st
	}
	for _, n := range o.Batch {
		prompts := make([][]int32, n)
		for i := range prompts {
			prompts[i] = tokens(extra, tok)
		}
		bt, err := DecodeBatch(e, prompts, o.Decode, meanOf(res.DecodeSamples))
		if err != nil {
			return res, err
		}
		res.Batch = append(res.Batch, bt)
	}
	res.PrefillTPS, res.PrefillSD = meanSD(res.PrefillSamples)
	res.DecodeTPS, res.DecodeTPSSD = meanSD(res.DecodeSamples)
	res.VerifyMS, res.VerifySD = meanSD(res.VerifySamples)
	res.VerifyTPS = float64(o.TreeNodes) / (res.VerifyMS / 1e3)
	if len(all) > 0 {
		sort.Float64s(all)
		res.DecodeMS = stat.Quantile(0.5, stat.Empirical, all, nil)
	}
	if len(all) > 1 {
		res.DecodeSD = math.Sqrt(stat.Variance(all, nil))
	}
	for at := 0; at < o.Prompt; at += e.MaxRows() { // the prefill's steps, each row attending to the keys up to itself
		rows := min(e.MaxRows(), o.Prompt-at)
		res.PrefillBytes += float64(StepBytes(p, rows, o.Depth+at+(rows+1)/2))
	}
	res.VerifyBytes = float64(StepBytes(p, o.TreeNodes, before+o.Decode+(o.TreeNodes+1)/2))
	meanCtx := before + o.Decode/2
	res.BytesPerToken = float64(StepBytes(p, 1, meanCtx))
	res.DecodeGBs = res.BytesPerToken * res.DecodeTPS / 1e9
	if probe > 0 {
		res.Fraction = res.DecodeGBs * 1e9 / probe
	}
	return res, nil
}

// warmup runs every kind of step once, untimed: a short prefill, a decode step and a verify
// of each tree size measured.
func warmup(e *engine.Engine, tok func() int32, o Options) error {
	s := e.NewSession()
	defer s.Close()
	prompt := tokens(max(1, min(o.Depth+o.Prompt, e.MaxRows())), tok)
	if _, err := s.Prefill(prompt, false); err != nil {
		return err
	}
	if _, err := s.Decode(tok()); err != nil {
		return err
	}
	for _, w := range append([]int{o.TreeNodes}, o.Widths...) {
		if len(prompt)+1+w > e.Context() {
			continue
		}
		if _, err := s.Verify(draftTree(w, tok)); err != nil {
			return err
		}
	}
	return nil
}

// tokens draws n tokens from tok.
func tokens(n int, tok func() int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = tok()
	}
	return out
}

// greedy is the token a greedy sampler chooses after logits l.
func greedy(l []float32) int32 { return int32(kernels.ArgmaxRow(l)) }

// meanOf returns the mean.
func meanOf(x []float64) float64 {
	m, _ := meanSD(x)
	return m
}

// meanSD returns the mean and the sample standard deviation (0 for one sample; both 0 for
// none).
func meanSD(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	if len(x) < 2 {
		return stat.Mean(x, nil), 0
	}
	return stat.MeanStdDev(x, nil)
}

// draftTree is a tree of n nodes in a typical draft shape: node i's parent is (i−1)/2 (a
// binary fan-out), so depth grows with log n.
func draftTree(n int, tok func() int32) engine.Tree {
	var t engine.Tree
	for i := 0; i < n; i++ {
		parent := -1
		if i > 0 {
			parent = (i - 1) / 2
		}
		t.Tokens, t.Parents = append(t.Tokens, tok()), append(t.Parents, parent)
	}
	return t
}

// StepBytes is the cost model's byte count for one step of rows rows, each attending to
// keys keys: weights once, activations per row, K/V per key.
func StepBytes(p *model.Program, rows, keys int) int64 {
	var n int64
	for _, op := range p.Ops {
		n += op.WeightBytes + int64(rows)*op.BytesPerRow + int64(rows*op.KeysRead(keys))*op.BytesPerKey
	}
	return n
}
