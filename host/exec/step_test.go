package exec_test

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/model"
)

// deviceCalls is a CPU backend that counts what a step does to the device.
type deviceCalls struct {
	*cpu.Backend
	calls int // allocations, frees, writes and launches
}

func (b *deviceCalls) Alloc(n int64) (device.Ptr, error) {
	b.calls++
	return b.Backend.Alloc(n)
}

func (b *deviceCalls) Free(p device.Ptr) error {
	b.calls++
	return b.Backend.Free(p)
}

func (b *deviceCalls) Write(p device.Ptr, data []byte) error {
	b.calls++
	return b.Backend.Write(p, data)
}

func (b *deviceCalls) Launch(k device.Spec, args any) error {
	b.calls++
	return b.Backend.Launch(k, args)
}

// badStep is a malformed step: the good one changed by mutate, refused with err.
type badStep struct {
	name   string
	mutate func(s *exec.Step)
	err    string
}

// A malformed step is refused with the first of its faults in Step.check's order — whatever
// the fault's place in a long key list (in a vector block, at its edge, in the tail) — before
// anything reaches the device, by an executor and by a pipeline alike; after the refusals the
// executor runs the good step to the bits of one that never saw them.
func TestBadStepsRefused(t *testing.T) {
	const slots, states, history = 200, 6, 96
	for _, name := range []string{"tiny-llama-tied-f32", "tiny-q35moe-q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := fixtures.Parse(name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := model.Build(f)
			if err != nil {
				t.Fatal(err)
			}
			vocab, recurrent := p.Config.NVocab, p.StateLayers > 0
			opt := exec.Options{MaxRows: 4, NSlots: slots, NStates: states}
			// three nodes of a chain after history positions: 97, 98 and 99 keys each (three
			// 32-key blocks and a tail of 1…3)
			good := func() exec.Step {
				s := exec.Step{OutRows: []int32{0, 2}}
				for i := range 3 {
					keys := make([]int32, 0, history+i+1)
					for k := range history + i + 1 {
						keys = append(keys, int32(k))
					}
					s.Tokens = append(s.Tokens, int32(i+1))
					s.Pos = append(s.Pos, int32(history+i))
					s.Slots = append(s.Slots, int32(history+i))
					s.Keys = append(s.Keys, keys)
					if recurrent {
						s.StateSrc = append(s.StateSrc, int32(i))
						s.StateDst = append(s.StateDst, int32(i+1))
					}
				}
				return s
			}
			key := func(r, i int, k int32) func(s *exec.Step) {
				return func(s *exec.Step) { s.Keys[r][i] = k }
			}
			both := func(fs ...func(s *exec.Step)) func(s *exec.Step) {
				return func(s *exec.Step) {
					for _, f := range fs {
						f(s)
					}
				}
			}
			keyErr := func(r int, k int32) string {
				return fmt.Sprintf("exec: row %d: key slot %d outside cache of %d", r, k, slots)
			}
			tokenErr := fmt.Sprintf("exec: row 1: token %d outside vocabulary of %d", vocab, vocab)
			badToken := func(s *exec.Step) { s.Tokens[1] = int32(vocab) }
			badOut := func(s *exec.Step) { s.OutRows[1] = 3 }
			cases := []badStep{
				{"no rows", func(s *exec.Step) { *s = exec.Step{} }, "exec: step of 0 rows (1…4 allowed)"},
				{"too many rows", func(s *exec.Step) {
					s.Tokens = append(s.Tokens, 1, 1)
				}, "exec: step of 5 rows (1…4 allowed)"},
				{"positions short", func(s *exec.Step) { s.Pos = s.Pos[:2] },
					"exec: step has 3 tokens but 2 positions, 3 slots, 3 key lists"},
				{"key lists short", func(s *exec.Step) { s.Keys = s.Keys[:1] },
					"exec: step has 3 tokens but 3 positions, 3 slots, 1 key lists"},
				{"negative token", func(s *exec.Step) { s.Tokens[0] = -1 },
					fmt.Sprintf("exec: row 0: token -1 outside vocabulary of %d", vocab)},
				{"token past vocabulary", badToken, tokenErr},
				{"negative position", func(s *exec.Step) { s.Pos[2] = -3 }, "exec: row 2: negative position -3"},
				{"slot past cache", func(s *exec.Step) { s.Slots[1] = slots },
					fmt.Sprintf("exec: row 1: slot %d outside cache of %d", slots, slots)},
				{"negative slot", func(s *exec.Step) { s.Slots[0] = -1 },
					fmt.Sprintf("exec: row 0: slot -1 outside cache of %d", slots)},
				{"no keys", func(s *exec.Step) { s.Keys[2] = nil }, "exec: row 2 attends to no keys"},
				{"first key negative", key(0, 0, -1), keyErr(0, -1)},
				{"key past cache mid-block", key(1, 40, slots), keyErr(1, slots)},
				{"key past cache at a block's end", key(1, 95, slots+1), keyErr(1, slots+1)},
				{"largest int32 key in the tail", key(2, 98, math.MaxInt32), keyErr(2, math.MaxInt32)},
				{"smallest int32 key mid-list", key(1, 50, math.MinInt32), keyErr(1, math.MinInt32)},
				{"last key of the first block", key(0, 31, slots), keyErr(0, slots)},
				{"first of two bad keys in a row", both(key(2, 10, -5), key(2, 60, 300)), keyErr(2, -5)},
				{"bad keys in two rows", both(key(2, 3, -7), key(1, 70, 201)), keyErr(1, 201)},
				{"bad key before a bad token", both(key(0, 64, 999), badToken), keyErr(0, 999)},
				{"bad token before a bad key", both(badToken, key(2, 20, 999)), tokenErr},
				{"bad slot before a bad key of its row", both(func(s *exec.Step) { s.Slots[1] = -2 }, key(1, 5, -1)),
					fmt.Sprintf("exec: row 1: slot -2 outside cache of %d", slots)},
				{"bad key before bad output rows", both(badOut, key(2, 97, slots)), keyErr(2, slots)},
				{"too many output rows", func(s *exec.Step) { s.OutRows = []int32{0, 1, 2, 0} },
					"exec: 4 output rows for a step of 3"},
				{"output row past step", badOut, "exec: output row 3 outside step of 3"},
			}
			if recurrent {
				badState := func(s *exec.Step) { s.StateDst[2] = states }
				stateErr := fmt.Sprintf("exec: row 2: state slots 2 → %d outside %d", states, states)
				cases = append(cases,
					badStep{"state slots short", func(s *exec.Step) { s.StateSrc = s.StateSrc[:2] },
						"exec: step of 3 rows has 2 source and 3 destination state slots"},
					badStep{"state slot past states", badState, stateErr},
					badStep{"bad key before a bad state slot", both(badState, key(1, 33, -1)), keyErr(1, -1)},
					badStep{"bad state slot before bad output rows", both(badOut, badState), stateErr},
				)
			}

			b := &deviceCalls{Backend: cpu.New(1)}
			defer b.Close()
			e, err := exec.New(b, p, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			pb := cpu.New(1)
			defer pb.Close()
			pl, err := exec.NewPipeline([]device.Backend{pb}, p, opt, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pl.Close()
			for _, c := range cases {
				s := good()
				c.mutate(&s)
				calls := b.calls
				err := e.Launch(s)
				if err == nil || err.Error() != c.err {
					t.Errorf("%s: executor: %v, want %s", c.name, err, c.err)
				}
				if b.calls != calls {
					t.Errorf("%s: refused after %d allocations, frees, writes or launches", c.name, b.calls-calls)
				}
				if _, err := pl.Run(s); err == nil || err.Error() != c.err {
					t.Errorf("%s: pipeline: %v, want %s", c.name, err, c.err)
				}
			}

			got, err := e.Run(good())
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := exec.New(cpu.New(1), p, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				fresh.Close()
				fresh.Backend().Close()
			}()
			want, err := fresh.Run(good())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Error("the good step's logits after the refusals differ from a fresh executor's")
			}
		})
	}
}

// copyKeys copies every key list and accepts it exactly when each key is a slot below n,
// whatever the list's length (vector blocks and tail) and wherever a bad key lies.
func TestCopyKeys(t *testing.T) {
	rng := rand.New(rand.NewSource(17))
	odd := []int32{-1, math.MinInt32, math.MaxInt32, 0}
	for it := range 20000 {
		n := []int{1, 2, 7, 200, 2560, math.MaxInt32, math.MaxInt32 - 1}[it%7]
		src := make([]int32, rng.Intn(200))
		for i := range src {
			src[i] = int32(rng.Int63n(int64(n)))
		}
		want := true
		if len(src) > 0 && rng.Intn(2) == 0 {
			i := rng.Intn(len(src))
			switch k := rng.Intn(4); k {
			case 0: // just past the cache
				src[i] = int32(min(int64(n), math.MaxInt32))
			default:
				src[i] = odd[rng.Intn(len(odd))]
			}
			want = src[i] >= 0 && int(src[i]) < n
		}
		dst := make([]int32, len(src)+3)
		for i := range dst {
			dst[i] = -9
		}
		if got := exec.CopyKeys(dst, src, n); got != want {
			t.Fatalf("keys %v below %d: %v, want %v", src, n, got, want)
		}
		if !slices.Equal(dst[:len(src)], src) || slices.ContainsFunc(dst[len(src):], func(k int32) bool { return k != -9 }) {
			t.Fatalf("keys %v copied as %v", src, dst)
		}
	}
}
