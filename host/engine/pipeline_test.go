package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/ptxvm"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/model"
)

// A model split into pipeline stages — on different backends, the PTX interpreter among them —
// gives every logit of a prefill, a tree verify, a commit, decoding and a rollback bit for bit
// as on one backend.
func TestPipelineEqualsSingleBackend(t *testing.T) {
	cases := []struct {
		fixture string
		first   []int // first layer of every stage after the first
		vm      bool  // the middle stage on the PTX interpreter
	}{
		{"tiny-llama-q8_0", []int{1}, false},
		{"tiny-q35moe-q4_0", []int{1, 3}, true}, // recurrent state split across stages
		{"small-llama-q4_k_m", []int{1, 2, 3}, false},
		{"small-q35moe-q4_k_m", []int{3, 4}, true}, // the cut falls between a GDN layer and full attention
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/first=%v", c.fixture, c.first), func(t *testing.T) {
			want := scenario(t, c.fixture, []device.Backend{cpu.New(2)}, nil)
			backends := []device.Backend{cpu.New(1)}
			for k := 1; k <= len(c.first); k++ {
				if c.vm && k == 1 {
					backends = append(backends, ptxvm.New(ptxvm.Options{Config: ptxvm.Config{NoRaceCheck: true}}))
				} else {
					backends = append(backends, cpu.New(k+1))
				}
			}
			got := scenario(t, c.fixture, backends, c.first)
			if len(got) != len(want) {
				t.Fatalf("%d logit rows, want %d", len(got), len(want))
			}
			for i := range want {
				sameBits(t, fmt.Sprintf("row %d", i), got[i], want[i])
			}
		})
	}
}

// scenario loads fixture split across backends and returns every logit row of a fixed
// session history.
func scenario(t *testing.T, fixture string, backends []device.Backend, first []int) [][]float32 {
	t.Helper()
	f, err := fixtures.Parse(fixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFileSplit(f, backends, first, engine.LoadOptions{MaxRows: 16, Context: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		m.Close()
		for _, b := range backends {
			b.Close()
		}
	}()
	nv := m.Program().Config.NVocab
	r := rand.New(rand.NewPCG(7, 7))
	s := m.NewSession()
	var rows [][]float32
	keep := func(l [][]float32, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, l...)
	}
	keep(s.Prefill(randTokens(r, 21, nv), true)) // two chunks of 16 rows
	tree := engine.Tree{Parents: []int{-1, 0, 0, 1, 2}, Tokens: randTokens(r, 5, nv)}
	keep(s.Verify(tree))
	if err := s.Commit([]int{0, 2, 4}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		l, err := s.Decode(int32(r.IntN(nv)))
		keep([][]float32{l}, err)
	}
	if err := s.Truncate(22); err != nil {
		t.Fatal(err)
	}
	l, err := s.Decode(int32(r.IntN(nv)))
	keep([][]float32{l}, err)
	// every step after the prefill's first chunk hands the residual stream on at each cut
	if pl, ok := m.Engine.Executor().(*exec.Pipeline); ok {
		d := int64(m.Program().Config.NEmbd)
		if st := pl.Handoffs(); st.Count < int64(len(first)) || st.Bytes < 4*d*st.Count || st.Time <= 0 {
			t.Errorf("hand-offs %+v over %d cuts of a %d-wide residual stream", st, len(first), d)
		}
	} else if len(first) > 0 {
		t.Errorf("a split model runs on %T, not a pipeline", m.Engine.Executor())
	}
	return rows
}

// PlanLayers splits by memory: equal devices get equal shares of the layers, a device with
// room for little gets little, and a model too big for the devices is an error.
func TestPlanLayers(t *testing.T) {
	f, err := fixtures.Parse("small-q35moe-q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	eo := engine.ExecOptions(p, engine.LoadOptions{MaxRows: 16, Context: 64, Sessions: 1})
	total, err := exec.Memory(p, eo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		memory []int64
		want   []int
		err    bool
	}{
		{"equal", []int64{total, total}, []int{4}, false},
		{"four", []int64{total, total, total, total}, []int{2, 4, 6}, false},
		{"small first", []int64{total / 4, total}, []int{1}, false},
		{"too small", []int64{total / 3, total / 3}, nil, true},
	} {
		got, err := engine.PlanLayers(p, eo, c.memory)
		if (err != nil) != c.err {
			t.Fatalf("%s: err = %v", c.name, err)
		}
		if !c.err && !slices.Equal(got, c.want) {
			t.Errorf("%s: first layers %v, want %v", c.name, got, c.want)
		}
	}
	// the stages of a plan hold the whole model once, plus the step buffers of each stage
	first, err := engine.PlanLayers(p, eo, []int64{total, total})
	if err != nil {
		t.Fatal(err)
	}
	cuts, err := exec.BlockCuts(p, first)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, r := range [][2]int{{0, cuts[0]}, {cuts[0], len(p.Ops)}} {
		o := eo
		o.Ops = r
		m, err := exec.Memory(p, o)
		if err != nil {
			t.Fatal(err)
		}
		sum += m
	}
	if sum <= total || sum > total+total/2 {
		t.Errorf("stages hold %d bytes, the whole model %d", sum, total)
	}
}

func TestPipelineErrors(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(1)
	defer b.Close()
	eo := exec.Options{MaxRows: 4, NSlots: 16}
	for _, c := range []struct {
		stages int
		cuts   []int
	}{{3, nil}, {2, []int{0}}, {2, []int{len(p.Ops)}}, {3, []int{5, 3}}, {1, []int{2}}} {
		backends := slices.Repeat([]device.Backend{b}, c.stages)
		if _, err := exec.NewPipeline(backends, p, eo, c.cuts); err == nil {
			t.Errorf("%d stages, cuts %v: no error", c.stages, c.cuts)
		}
	}
	for i, op := range p.Ops { // a cut between a layer's K/V store and its attention
		if op.Kind == model.OpAttention {
			if _, err := exec.NewPipeline([]device.Backend{b, b}, p, eo, []int{i}); err == nil || !strings.Contains(err.Error(), "K/V store") {
				t.Errorf("cut at op %d (%s): err = %v", i, op.Name, err)
			}
			break
		}
	}
	if _, err := exec.BlockCuts(p, []int{7}); err == nil {
		t.Error("BlockCuts of a missing layer: no error")
	}
}

// Trees of several sessions verified in one step give each session the logits it gets alone,
// and each commits and continues as if verified alone.
func TestVerifyBatchEqualsAlone(t *testing.T) {
	for _, name := range []string{"small-llama-q4_k_m", "tiny-q35moe-q4_0"} {
		t.Run(name, func(t *testing.T) {
			m := load(t, name, 2, 32, 96)
			nv := m.Program().Config.NVocab
			r := rand.New(rand.NewPCG(11, 12))
			prompts := [][]int32{randTokens(r, 9, nv), randTokens(r, 17, nv), randTokens(r, 4, nv)}
			trees := []engine.Tree{
				{Tokens: randTokens(r, 5, nv), Parents: []int{-1, 0, 0, 1, 3}},
				{Tokens: randTokens(r, 1, nv), Parents: []int{-1}},
				{Tokens: randTokens(r, 8, nv), Parents: []int{-1, 0, 1, 2, 0, 4, 4, 6}},
			}
			paths := [][]int{{0, 1, 3}, {0}, {0, 4, 6, 7}}
			next := randTokens(r, 3, nv)
			run := func(batch bool) [][]float32 {
				var ss []*engine.Session
				for _, p := range prompts {
					s := m.NewSession()
					defer s.Close()
					if _, err := s.Prefill(p, false); err != nil {
						t.Fatal(err)
					}
					ss = append(ss, s)
				}
				var rows [][]float32
				if batch {
					out, err := m.VerifyBatch(ss, trees)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range out {
						rows = append(rows, o...)
					}
				} else {
					for k, s := range ss {
						o, err := s.Verify(trees[k])
						if err != nil {
							t.Fatal(err)
						}
						rows = append(rows, o...)
					}
				}
				for k, s := range ss {
					if err := s.Commit(paths[k]); err != nil {
						t.Fatal(err)
					}
					l, err := s.Decode(next[k])
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, l)
				}
				return rows
			}
			alone, batched := run(false), run(true)
			for i := range alone {
				sameBits(t, fmt.Sprintf("row %d", i), batched[i], alone[i])
			}
			s := m.NewSession()
			defer s.Close()
			if _, err := m.VerifyBatch([]*engine.Session{s, s}, trees[:2]); err == nil {
				t.Error("a session twice in one batch: no error")
			}
			big := engine.Tree{Tokens: randTokens(r, 30, nv), Parents: append([]int{-1}, make([]int, 29)...)}
			if _, err := m.VerifyBatch([]*engine.Session{s, m.NewSession()}, []engine.Tree{big, trees[0]}); err == nil {
				t.Error("35 nodes in a 32-row step: no error")
			}
		})
	}
}

// A split the model cannot take is refused at once, in words a user of --backend and
// --layers can act on.
func TestSplitErrors(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0") // 2 layers
	if err != nil {
		t.Fatal(err)
	}
	three := []device.Backend{cpu.New(1), cpu.New(1), cpu.New(1)}
	for _, c := range []struct {
		backends []device.Backend
		first    []int
		want     string
	}{
		{three, nil, "a model of 2 layers cannot be split into 3 stages"},
		{three[:1], []int{1}, "needs several backends"},
		{three[:2], []int{1, 2}, "got 2: [1 2]"},
	} {
		_, err := engine.FromFileSplit(f, c.backends, c.first, engine.LoadOptions{MaxRows: 16, Context: 32})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d backends, first %v: %v, want an error containing %q", len(c.backends), c.first, err, c.want)
		}
	}
}
