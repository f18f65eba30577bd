package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"verity/host/engine"
)

// A prompt that begins with what a closed session computed runs only the rest, with the
// same logits; an attention-only model reuses any common prefix, a recurrent one the common
// part up to a kept state (before the earlier prompt's last token, near and at its end), so
// that an exact repeat of a prompt computes only its last token.
func TestPrefixCacheReuse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recurrent bool
	}{{"tiny-llama-q8_0", false}, {"tiny-q35moe-q8_0", true}, {"tiny-mixtral-q8_0", false}} {
		t.Run("model="+tc.name, func(t *testing.T) {
			o := engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2}
			cold := loadWith(t, tc.name, 2, o)
			o.PrefixCache = true
			warm := loadWith(t, tc.name, 2, o)
			nv := cold.Program().Config.NVocab
			r := rand.New(rand.NewPCG(3, 4))
			prompt := randTokens(r, 20, nv)
			gen := randTokens(r, 5, nv)

			// seed leaves one cached prefix: a session's prompt and 5 decoded tokens
			seed := func() {
				warm.DropPrefixes()
				a := warm.NewSession()
				if _, err := a.Prefill(prompt, false); err != nil {
					t.Fatal(err)
				}
				for _, tok := range gen {
					if _, err := a.Decode(tok); err != nil {
						t.Fatal(err)
					}
				}
				a.Close()
				if st := warm.PrefixStats(); st.Entries != 1 || st.Tokens != 25 {
					t.Fatalf("after one session: %+v", st)
				}
			}
			history := append(slices.Clone(prompt), gen...)
			for _, c := range []struct {
				prompt []int32
				reused int // attention-only
				state  int // recurrent: the kept state it starts from
			}{
				{append(slices.Clone(prompt[:15]), randTokens(r, 4, nv)...), 15, 0},
				{append(slices.Clone(history), randTokens(r, 3, nv)...), 25, 25},
				{append(slices.Clone(history[:22]), randTokens(r, 3, nv)...), 22, 19},
				{slices.Clone(prompt), 19, 19}, // the last token's logits are computed
				{append(slices.Clone(history[:24]), 0), 24, 24},
			} {
				want := c.reused
				if tc.recurrent {
					want = c.state
				}
				seed()
				before := warm.PrefixStats()
				s := warm.NewSession()
				got, err := s.Prefill(c.prompt, false)
				if err != nil {
					t.Fatal(err)
				}
				ref := cold.NewSession()
				exp, err := ref.Prefill(c.prompt, false)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("prompt of %d", len(c.prompt))
				sameBits(t, what, got[0], exp[0])
				if st := warm.PrefixStats(); st.Reused-before.Reused != int64(want) || (want > 0) != (st.Hits > before.Hits) {
					t.Errorf("%s: reused %d positions (hits %d → %d), want %d", what, st.Reused-before.Reused, before.Hits, st.Hits, want)
				}
				// the session goes on as one without the cache: decode, verify, roll back
				for i, tok := range randTokens(r, 3, nv) {
					got, err := s.Decode(tok)
					if err != nil {
						t.Fatal(err)
					}
					exp, err := ref.Decode(tok)
					if err != nil {
						t.Fatal(err)
					}
					sameBits(t, fmt.Sprintf("%s, decode %d", what, i), got, exp)
				}
				tree := engine.Tree{Tokens: randTokens(r, 4, nv), Parents: []int{-1, 0, 0, 1}}
				gotT, err := s.Verify(tree)
				if err != nil {
					t.Fatal(err)
				}
				expT, err := ref.Verify(tree)
				if err != nil {
					t.Fatal(err)
				}
				for i := range gotT {
					sameBits(t, fmt.Sprintf("%s, node %d", what, i), gotT[i], expT[i])
				}
				if err := s.Truncate(3); err != nil {
					t.Fatal(err)
				}
				if err := ref.Truncate(3); err != nil {
					t.Fatal(err)
				}
				got1, err := s.Decode(7)
				if err != nil {
					t.Fatal(err)
				}
				exp1, err := ref.Decode(7)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, what+", after truncating into the shared part", got1, exp1)
				s.Close()
				ref.Close()
			}
			// Echo-style prefills (every position's logits) compute every position.
			before := warm.PrefixStats()
			s := warm.NewSession()
			if _, err := s.Prefill(history, true); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if st := warm.PrefixStats(); st.Hits != before.Hits || st.Misses != before.Misses {
				t.Errorf("a prefill of every position's logits looked in the cache: %+v → %+v", before, st)
			}
			warm.DropPrefixes()
			if st := warm.PrefixStats(); st.Entries != 0 || warm.FreeSlots() != cold.FreeSlots() || warm.FreeStates() < cold.FreeStates() {
				t.Errorf("after dropping the prefixes: %+v, %d free slots (%d without a cache), %d free states (%d)",
					st, warm.FreeSlots(), cold.FreeSlots(), warm.FreeStates(), cold.FreeStates())
			}
		})
	}
}

// Sessions on an engine with a prefix cache, driven at random — prompts that repeat parts of
// earlier sessions, decodes, verified trees and committed paths, rollbacks, closes, with the
// cache small enough that prefixes are evicted — give the bits of the same sessions on an
// engine without one, and every slot is free once they are closed and the cache dropped.
func TestPrefixCacheLockstep(t *testing.T) {
	for _, name := range []string{"tiny-llama-f32", "tiny-q35moe-q8_0"} {
		t.Run("model="+name, func(t *testing.T) {
			o := engine.LoadOptions{MaxRows: 8, Context: 40, Sessions: 3}
			cold := loadWith(t, name, 2, o)
			o.PrefixCache = true
			warm := loadWith(t, name, 2, o)
			slots0, states0 := warm.FreeSlots(), warm.FreeStates()
			nv := cold.Program().Config.NVocab
			r := rand.New(rand.NewPCG(11, 12))
			type pair struct {
				w, c *engine.Session
				hist []int32
			}
			var live []*pair
			var past [][]int32 // closed sessions' histories
			check := func(what string, a, b [][]float32) {
				t.Helper()
				for i := range a {
					sameBits(t, fmt.Sprintf("%s row %d", what, i), a[i], b[i])
				}
			}
			both := func(what string, f func(s *engine.Session) ([][]float32, error), p *pair) bool {
				t.Helper()
				a, errA := f(p.w)
				b, errB := f(p.c)
				if (errA != nil) != (errB != nil) {
					t.Fatalf("%s: with the cache %v, without %v", what, errA, errB)
				}
				if errA == nil {
					check(what, a, b)
				}
				return errA == nil
			}
			for step := range 400 {
				what := fmt.Sprintf("step %d", step)
				switch op := r.IntN(6); {
				case op == 0 && len(live) < 3: // open, often with a part of an earlier history
					var prompt []int32
					if len(past) > 0 && r.IntN(4) > 0 {
						h := past[r.IntN(len(past))]
						prompt = slices.Clone(h[:r.IntN(len(h)+1)])
					}
					prompt = append(prompt, randTokens(r, 1+r.IntN(6), nv)...)
					prompt = prompt[:min(len(prompt), 30)]
					p := &pair{w: warm.NewSession(), c: cold.NewSession(), hist: prompt}
					if !both(what+" open", func(s *engine.Session) ([][]float32, error) { return s.Prefill(prompt, false) }, p) {
						t.Fatalf("%s: prefill failed", what)
					}
					live = append(live, p)
				case op == 1 && len(live) > 0: // decode
					p := live[r.IntN(len(live))]
					if len(p.hist) >= 36 {
						continue
					}
					tok := int32(r.IntN(nv))
					both(what+" decode", func(s *engine.Session) ([][]float32, error) {
						l, err := s.Decode(tok)
						return [][]float32{l}, err
					}, p)
					p.hist = append(p.hist, tok)
				case op == 2 && len(live) > 0: // verify a tree and commit a path
					p := live[r.IntN(len(live))]
					if len(p.hist) >= 30 {
						continue
					}
					n := 1 + r.IntN(8)
					tree := engine.Tree{Tokens: randTokens(r, n, nv), Parents: []int{-1}}
					for i := 1; i < n; i++ {
						tree.Parents = append(tree.Parents, r.IntN(i))
					}
					both(what+" verify", func(s *engine.Session) ([][]float32, error) { return s.Verify(tree) }, p)
					var pth []int
					if k := r.IntN(n + 1); k > 0 {
						pth = path(tree.Parents, k-1)
					}
					both(what+" commit", func(s *engine.Session) ([][]float32, error) { return nil, s.Commit(pth) }, p)
					for _, node := range pth {
						p.hist = append(p.hist, tree.Tokens[node])
					}
				case op == 3 && len(live) > 0: // roll back
					p := live[r.IntN(len(live))]
					n := r.IntN(len(p.hist) + 1)
					both(what+" truncate", func(s *engine.Session) ([][]float32, error) { return nil, s.Truncate(n) }, p)
					p.hist = p.hist[:n]
				case op >= 4 && len(live) > 0: // close
					i := r.IntN(len(live))
					p := live[i]
					p.w.Close()
					p.c.Close()
					if len(p.hist) > 0 {
						past = append(past, p.hist)
					}
					live = slices.Delete(live, i, i+1)
				}
			}
			for _, p := range live {
				p.w.Close()
				p.c.Close()
			}
			st := warm.PrefixStats()
			t.Logf("%+v", st)
			if st.Hits == 0 || st.Reused == 0 || st.Evicted == 0 {
				t.Errorf("the run did not exercise the cache: %+v", st)
			}
			warm.DropPrefixes()
			if warm.FreeSlots() != slots0 || warm.FreeStates() != states0 {
				t.Errorf("after closing and dropping: %d free slots (want %d), %d free states (want %d)", warm.FreeSlots(), slots0, warm.FreeStates(), states0)
			}
		})
	}
}

// BenchmarkPrefixCache measures a session's prompt of 1024 tokens after a closed session's
// prompt of the same first 1000: computed whole (cold), and taking those 1000 from the prefix
// cache (warm).
func BenchmarkPrefixCache(b *testing.B) {
	for _, name := range []string{"small-llama-q4_k_m", "small-q35moe-q4_k_m"} {
		for _, warm := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/warm=%v", name, warm), func(b *testing.B) {
				m := loadWith(b, name, 2, engine.LoadOptions{MaxRows: 64, Context: 1100, Sessions: 2, PrefixCache: warm})
				r := rand.New(rand.NewPCG(1, 2))
				shared := randTokens(r, 1000, m.Program().Config.NVocab)
				s := m.NewSession()
				if _, err := s.Prefill(shared, false); err != nil {
					b.Fatal(err)
				}
				s.Close()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					prompt := append(slices.Clone(shared), randTokens(r, 24, m.Program().Config.NVocab)...)
					s := m.NewSession()
					if _, err := s.Prefill(prompt, false); err != nil {
						b.Fatal(err)
					}
					s.Close()
				}
				b.ReportMetric(float64(m.PrefixStats().Reused)/float64(b.N), "reused/op")
			})
		}
	}
}
