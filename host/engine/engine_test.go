package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
)

// load builds a catalogue fixture in memory and an engine over it.
func load(t testing.TB, name string, workers, maxRows, ctx int) *engine.Model {
	t.Helper()
	return loadWith(t, name, workers, engine.LoadOptions{MaxRows: maxRows, Context: ctx})
}

// loadWith builds fixture name with o over a CPU backend of workers threads.
func loadWith(t testing.TB, name string, workers int, o engine.LoadOptions) *engine.Model {
	t.Helper()
	f, err := fixtures.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(workers), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

func sameBits(t testing.TB, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: index %d: %g (%#08x) != %g (%#08x)", what, i, a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
		}
	}
}

// testModels are the fixtures the engine guarantees are checked on: every architecture and
// every weight type family, at the sizes the test suite can afford.
var testModels = []string{
	"tiny-llama-f32", "tiny-llama-tied-f32", "tiny-qwen3-f32", "tiny-llama-f16", "tiny-llama-bf16",
	"tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-llama-q4_1", "tiny-qwen3-q5_0", "tiny-qwen3-q5_1",
	"small-llama-q4_k_m", "small-qwen3-q6_k", "small-llama-q2_k", "small-llama-q3_k_m", "small-qwen3-q5_k_m",
	"tiny-q35moe-f32", "tiny-q35moe-q8_0", "tiny-q35moe-q4_0", "small-q35moe-q4_k_m",
	"tiny-mixtral-f32", "tiny-mixtral-q8_0", "small-mixtral-q6_k",
	"tiny-qwen2-f32", "tiny-qwen2-q8_0", "small-qwen2-q4_k_m",
	"tiny-qwen3moe-f32", "tiny-qwen3moe-q8_0", "small-qwen3moe-q4_k_m",
	"tiny-phi3-f32", "tiny-phi3-q8_0", "small-phi3-q6_k", "tiny-phi3-longrope-f32", "tiny-phi3-longrope-q8_0",
	"tiny-gemma-f32", "tiny-gemma2-f32", "tiny-gemma2-q8_0", "tiny-gemma3-f32", "tiny-gemma3-q8_0", "small-gemma2-q4_k_m", "small-gemma3-q6_k",
}

// Prefill in any chunking gives the bits of token-by-token decoding.
func TestPrefillChunking(t *testing.T) {
	for _, name := range testModels {
		t.Run("model="+name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			ref := load(t, name, 2, 64, 128)
			toks := randTokens(r, 80, ref.Program().Config.NVocab) // longer than one 64-row chunk
			all, err := ref.NewSession().Prefill(toks, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{1, 7} {
				m := load(t, name, 1, chunk, 128)
				s := m.NewSession()
				got, err := s.Prefill(toks, true)
				if err != nil {
					t.Fatal(err)
				}
				for i := range toks {
					sameBits(t, fmt.Sprintf("chunk=%d position %d", chunk, i), got[i], all[i])
				}
			}
			// and one Decode at a time
			m := load(t, name, 2, 8, 128)
			s := m.NewSession()
			for i, tok := range toks[:20] {
				got, err := s.Decode(tok)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, fmt.Sprintf("decode position %d", i), got, all[i])
			}
		})
	}
}

// treeShapes returns 8-node trees: a chain, a star, a binary tree and random ones.
func treeShapes(r *rand.Rand) map[string][]int {
	shapes := map[string][]int{
		"chain":  {-1, 0, 1, 2, 3, 4, 5, 6},
		"star":   {-1, 0, 0, 0, 0, 0, 0, 0},
		"binary": {-1, 0, 0, 1, 1, 2, 2, 3},
		"single": {-1},
	}
	for k := 0; k < 3; k++ {
		p := []int{-1}
		for i := 1; i < 8; i++ {
			p = append(p, r.IntN(i))
		}
		shapes[fmt.Sprintf("random%d", k)] = p
	}
	return shapes
}

// path returns the nodes from the root to node i.
func path(parents []int, i int) []int {
	var p []int
	for ; i >= 0; i = parents[i] {
		p = append([]int{i}, p...)
	}
	return p
}

// Verify(tree)[i] is bit-identical to decoding the path root…i, for every node of every shape.
func TestVerifyEqualsDecode(t *testing.T) {
	for _, name := range testModels {
		t.Run("model="+name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			// The verify session and one reference session at a time, each up to 58+16 positions.
			m := loadWith(t, name, 2, engine.LoadOptions{MaxRows: 16, Context: 96, Sessions: 2})
			nv := m.Program().Config.NVocab
			short, long := randTokens(r, 13, nv), randTokens(r, 58, nv)
			shapes := treeShapes(r)
			for _, shape := range []string{"chain", "star", "binary", "single", "random0", "random1", "random2"} {
				parents := shapes[shape]
				prefix := short
				if shape == "chain" || shape == "binary" { // key lists across an attention chunk's end
					prefix = long
				}
				tree := engine.Tree{Tokens: randTokens(r, len(parents), nv), Parents: parents}
				s := m.NewSession()
				if _, err := s.Prefill(prefix, false); err != nil {
					t.Fatal(err)
				}
				got, err := s.Verify(tree)
				if err != nil {
					t.Fatal(err)
				}
				for i := range parents {
					ref := m.NewSession()
					var toks []int32
					for _, n := range path(parents, i) {
						toks = append(toks, tree.Tokens[n])
					}
					want, err := ref.Prefill(append(append([]int32(nil), prefix...), toks...), true)
					if err != nil {
						t.Fatal(err)
					}
					sameBits(t, fmt.Sprintf("%s node %d", shape, i), got[i], want[len(want)-1])
					ref.Close()
				}
				s.Close()
			}
		})
	}
}

// Commit(path) then Decode equals plain decoding of prefix+path; Truncate rolls back exactly.
func TestCommitAndTruncate(t *testing.T) {
	for _, name := range []string{"tiny-llama-f32", "tiny-qwen3-q8_0", "small-llama-q4_k_m", "tiny-q35moe-f32", "small-q35moe-q4_k_m"} {
		t.Run("model="+name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			m := load(t, name, 2, 16, 96)
			nv := m.Program().Config.NVocab
			prefix := randTokens(r, 9, nv)
			parents := []int{-1, 0, 0, 1, 1, 3, 2, 5}
			tree := engine.Tree{Tokens: randTokens(r, 8, nv), Parents: parents}
			next := randTokens(r, 3, nv)
			free0 := m.FreeSlots()

			s := m.NewSession()
			if _, err := s.Prefill(prefix, false); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(tree); err != nil {
				t.Fatal(err)
			}
			accepted := path(parents, 5) // 0 1 3 5
			if err := s.Commit(accepted); err != nil {
				t.Fatal(err)
			}
			if s.Len() != len(prefix)+len(accepted) {
				t.Fatalf("after commit: %d positions, want %d", s.Len(), len(prefix)+len(accepted))
			}
			wantToks := slices.Clone(prefix)
			for _, n := range accepted {
				wantToks = append(wantToks, tree.Tokens[n])
			}
			if got := s.Tokens(); !slices.Equal(got, wantToks) {
				t.Fatalf("after commit: tokens %v, want %v", got, wantToks)
			}
			var got [][]float32
			for _, tok := range next {
				l, err := s.Decode(tok)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, l)
			}
			plain := append([]int32(nil), prefix...)
			for _, n := range accepted {
				plain = append(plain, tree.Tokens[n])
			}
			plain = append(plain, next...)
			want, err := m.NewSession().Prefill(plain, true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range next {
				sameBits(t, fmt.Sprintf("decode %d after commit", i), got[i], want[len(prefix)+len(accepted)+i])
			}

			// roll back to the prefix and decode something else
			if err := s.Truncate(len(prefix)); err != nil {
				t.Fatal(err)
			}
			l, err := s.Decode(next[0])
			if err != nil {
				t.Fatal(err)
			}
			want2, err := m.NewSession().Prefill(append(append([]int32(nil), prefix...), next[0]), false)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "decode after truncate", l, want2[0])
			s.Close()
			// the two reference sessions above were never closed: release them by count
			if m.FreeSlots() > free0 {
				t.Fatalf("more slots free (%d) than at the start (%d)", m.FreeSlots(), free0)
			}
		})
	}
}

// Bad requests fail with an error and leave the session as it was.
func TestBadInputLeavesStateUnchanged(t *testing.T) {
	m := load(t, "tiny-llama-f32", 2, 8, 32)
	nv := int32(m.Program().Config.NVocab)
	s := m.NewSession()
	prefix := []int32{1, 2, 3, 4}
	if _, err := s.Prefill(prefix, false); err != nil {
		t.Fatal(err)
	}
	free := m.FreeSlots()
	bad := []struct {
		name string
		do   func() error
	}{
		{"token ≥ vocab", func() error { _, err := s.Decode(nv); return err }},
		{"negative token", func() error { _, err := s.Prefill([]int32{5, -1}, false); return err }},
		{"empty prefill", func() error { _, err := s.Prefill(nil, false); return err }},
		{"context overflow", func() error { _, err := s.Prefill(make([]int32, 40), false); return err }},
		{"tree cycle", func() error {
			_, err := s.Verify(engine.Tree{Tokens: []int32{1, 2, 3}, Parents: []int{-1, 2, 1}})
			return err
		}},
		{"parent after child", func() error {
			_, err := s.Verify(engine.Tree{Tokens: []int32{1, 2, 3}, Parents: []int{-1, 2, 0}})
			return err
		}},
		{"two roots", func() error {
			_, err := s.Verify(engine.Tree{Tokens: []int32{1, 2}, Parents: []int{-1, -1}})
			return err
		}},
		{"tree too deep for context", func() error {
			p := []int{-1, 0, 1, 2, 3, 4, 5, 6}
			s2 := m.NewSession()
			defer s2.Close()
			if _, err := s2.Prefill(make([]int32, 25), false); err != nil {
				return nil
			}
			_, err := s2.Verify(engine.Tree{Tokens: make([]int32, 8), Parents: p})
			return err
		}},
		{"tree token ≥ vocab", func() error {
			_, err := s.Verify(engine.Tree{Tokens: []int32{1, nv}, Parents: []int{-1, 0}})
			return err
		}},
		{"tree larger than a step", func() error {
			_, err := s.Verify(engine.Tree{Tokens: make([]int32, 9), Parents: []int{-1, 0, 0, 0, 0, 0, 0, 0, 0}})
			return err
		}},
		{"commit without tree", func() error { return s.Commit([]int{0}) }},
		{"truncate past end", func() error { return s.Truncate(5) }},
		{"truncate negative", func() error { return s.Truncate(-1) }},
	}
	for _, c := range bad {
		if err := c.do(); err == nil {
			t.Errorf("%s: no error", c.name)
		}
		if s.Len() != len(prefix) || m.FreeSlots() != free {
			t.Fatalf("%s: state changed: %d positions, %d free slots (want %d, %d)", c.name, s.Len(), m.FreeSlots(), len(prefix), free)
		}
	}
	// invalid commit paths of a real tree
	if _, err := s.Verify(engine.Tree{Tokens: []int32{1, 2, 3}, Parents: []int{-1, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]int{{1}, {0, 2, 1}, {0, 3}, {0, 1, 2}} {
		if err := s.Commit(p); err == nil {
			t.Errorf("commit %v accepted", p)
		}
	}
	if err := s.Commit([]int{0, 2}); err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(prefix)+2 {
		t.Fatalf("after commit: %d positions", s.Len())
	}
	// the session still decodes what a fresh one does
	got, err := s.Decode(7)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.NewSession().Prefill([]int32{1, 2, 3, 4, 1, 3, 7}, false)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "decode after failed requests", got, want[0])
}

// Results do not depend on the number of CPU workers.
func TestThreadCountInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	toks := randTokens(r, 20, 1024)
	var ref [][]float32
	for _, w := range []int{1, 2, 5} {
		m := load(t, "small-llama-q4_k_m", w, 16, 64)
		got, err := m.NewSession().Prefill(toks, true)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = got
			continue
		}
		for i := range got {
			sameBits(t, fmt.Sprintf("workers=%d position %d", w, i), got[i], ref[i])
		}
	}
}

// Recurrent models: rolling back to any position rebuilds exactly the state decoding had
// there (from the nearest checkpoint, replaying tokens), over several commits and rollbacks,
// and every state slot is returned when sessions close.
func TestRecurrentRollback(t *testing.T) {
	m := load(t, "tiny-q35moe-f32", 2, 8, 96)
	if m.Program().StateLayers == 0 {
		t.Fatal("fixture has no recurrent layers")
	}
	freeStates, freeSlots := m.FreeStates(), m.FreeSlots()
	r := rand.New(rand.NewPCG(21, 22))
	nv := m.Program().Config.NVocab
	toks := randTokens(r, 40, nv)
	ref, err := m.NewSession().Prefill(toks, true)
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewSession()
	if _, err := s.Prefill(toks[:10], false); err != nil {
		t.Fatal(err)
	}
	// grow through commits of verified chains, so checkpoints pile up
	pos := 10
	for pos < 30 {
		tree := engine.Tree{Tokens: toks[pos : pos+4], Parents: []int{-1, 0, 1, 2}}
		if _, err := s.Verify(tree); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit([]int{0, 1, 2}); err != nil {
			t.Fatal(err)
		}
		pos += 3
	}
	for _, n := range []int{29, 25, 17, 11, 3, 0} {
		if err := s.Truncate(n); err != nil {
			t.Fatal(err)
		}
		if s.Len() != n {
			t.Fatalf("after Truncate(%d): %d positions", n, s.Len())
		}
		got, err := s.Decode(toks[n])
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("decode after truncating to %d", n), got, ref[n])
		if err := s.Truncate(n); err != nil { // and undo that decode
			t.Fatal(err)
		}
	}
	s.Close()
	// the reference session still holds one state and its 40 slots
	if m.FreeStates() != freeStates-1 || m.FreeSlots() != freeSlots-len(toks) {
		t.Errorf("after close: %d free states (want %d), %d free slots (want %d)", m.FreeStates(), freeStates-1, m.FreeSlots(), freeSlots-len(toks))
	}
	m2 := load(t, "tiny-q35moe-f32", 1, 8, 64)
	f0, k0 := m2.FreeStates(), m2.FreeSlots()
	s2 := m2.NewSession()
	s2.Prefill(toks[:20], false)
	s2.Verify(engine.Tree{Tokens: toks[20:28], Parents: []int{-1, 0, 0, 1, 1, 2, 2, 3}})
	s2.Commit([]int{0, 2, 6})
	s2.Truncate(5)
	s2.Close()
	if m2.FreeStates() != f0 || m2.FreeSlots() != k0 {
		t.Errorf("after close: %d free states (want %d), %d free slots (want %d)", m2.FreeStates(), f0, m2.FreeSlots(), k0)
	}
}

// A random sequence of prefills, verifies, commits and rollbacks keeps the session equivalent
// to plainly decoding its committed tokens, and returns every cache and state slot on close.
func TestRandomSessionHistory(t *testing.T) {
	for _, name := range []string{"tiny-q35moe-q8_0", "tiny-llama-f32"} {
		t.Run("model="+name, func(t *testing.T) {
			m := load(t, name, 2, 8, 72)
			nv := m.Program().Config.NVocab
			r := rand.New(rand.NewPCG(31, 32))
			f0, k0 := m.FreeStates(), m.FreeSlots()
			s := m.NewSession()
			var hist []int32
			for step := 0; step < 40; step++ {
				switch op := r.IntN(4); {
				case op == 0 && len(hist) < 30:
					toks := randTokens(r, 1+r.IntN(9), nv)
					if _, err := s.Prefill(toks, false); err != nil {
						t.Fatal(err)
					}
					hist = append(hist, toks...)
				case op == 1 && len(hist) < 30:
					n := 1 + r.IntN(8)
					tree := engine.Tree{Tokens: randTokens(r, n, nv), Parents: []int{-1}}
					for i := 1; i < n; i++ {
						tree.Parents = append(tree.Parents, r.IntN(i))
					}
					if _, err := s.Verify(tree); err != nil {
						t.Fatal(err)
					}
					var p []int
					if k := r.IntN(n + 1); k > 0 {
						p = path(tree.Parents, k-1)
					}
					if err := s.Commit(p); err != nil {
						t.Fatal(err)
					}
					for _, node := range p {
						hist = append(hist, tree.Tokens[node])
					}
				case op == 2 && len(hist) > 0:
					n := r.IntN(len(hist) + 1)
					if err := s.Truncate(n); err != nil {
						t.Fatal(err)
					}
					hist = hist[:n]
				default:
					continue
				}
				if s.Len() != len(hist) {
					t.Fatalf("step %d: session has %d positions, history %d", step, s.Len(), len(hist))
				}
				next := int32(r.IntN(nv))
				got, err := s.Decode(next)
				if err != nil {
					t.Fatal(err)
				}
				ref := m.NewSession()
				want, err := ref.Prefill(append(append([]int32(nil), hist...), next), false)
				if err != nil {
					t.Fatal(err)
				}
				ref.Close()
				sameBits(t, fmt.Sprintf("step %d", step), got, want[0])
				if err := s.Truncate(len(hist)); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			if m.FreeStates() != f0 || m.FreeSlots() != k0 {
				t.Errorf("after close: %d free states (want %d), %d free slots (want %d)", m.FreeStates(), f0, m.FreeSlots(), k0)
			}
		})
	}
}
