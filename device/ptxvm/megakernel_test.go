package ptxvm_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"verity/device"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/fixtures"
	"verity/megakernel"
	"verity/ptx"
)

// The megakernel's PTX, interpreted, reproduces the goldens of dense and qwen35moe fixtures
// bit for bit: every step — prefill, tree verify, decode — one launch of the
// persistent kernel, its SMs waiting on each other's completion counters.
func TestMegakernelGoldens(t *testing.T) {
	want, err := fixtures.Goldens()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fixture string
		sms     int
	}{{"tiny-llama-q8_0", 3}, {"tiny-q35moe-q4_0", 2}, {"small-llama-q4_k_m", 2}, {"tiny-gemma2-q8_0", 2}} { // small-llama: q8_K activations, a body that has its block to itself; gemma2: sliding windows shorter than the prompt, soft caps, GeGLU
		t.Run(c.fixture, func(t *testing.T) {
			file, err := fixtures.Bytes(c.fixture)
			if err != nil {
				t.Fatal(err)
			}
			b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: c.sms, NoRaceCheck: true}})
			defer b.Close()
			g, err := fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, fixtures.GoldenOptions{Megakernel: true, SMs: c.sms})
			if err != nil {
				t.Fatal(err)
			}
			if d := g.Diff(want[c.fixture]); len(d) > 0 {
				t.Errorf("%v differ from the golden", d)
			}
			// one launch of sms blocks per step (19 steps: two prefill chunks, the tree, 16 decodes), where op-by-op launches run thousands
			st := b.Stats()
			t.Logf("%d blocks, %d warp instructions, %d lanes' loads of staged weights", st.Blocks, st.WarpInstructions, st.GenericShared)
			if st.Blocks != int64(19*c.sms) {
				t.Errorf("%d blocks ran, want 19 steps × %d SMs", st.Blocks, c.sms)
			}
			// blocks that wait stage their matvecs' weights, and the bodies read them there
			if st.GenericShared == 0 {
				t.Errorf("no body read staged weights")
			}
		})
	}
}

// A stream whose dependency never finishes makes a block give up: it writes the status words
// (which block, item, instruction and part, the counter it waited for, the value it saw and
// the one it needed) and traps, instead of hanging; a launch the kernel cannot run (epoch 0)
// is refused with its own status. The stream is a valid schedule with one queue's first two
// items swapped, so that its first item waits for the second.
func TestMegakernelGivesUp(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 2, NoRaceCheck: true}})
	defer b.Close()
	const n = 512
	alloc := func(size int) device.Ptr {
		p, err := b.Alloc(int64(size))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	x, y, z := alloc(4*n), alloc(4*n), alloc(4*n)
	ops := []megakernel.Op{
		{Name: "y", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: x, B: x, Y: y, N: n}, Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: 12 * n},
		{Name: "z", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: y, B: x, Y: z, N: n}, Reads: []megakernel.Resource{1, 2}, Writes: []megakernel.Resource{3}, Bytes: 12 * n},
	}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	q := s.Queues[0]
	if len(q) != 2 || q[0].Instr != 0 || q[1].Instr != 1 || s.Instrs[1].Deps[0] != 0 {
		t.Fatalf("queue %v, dependencies %v", q, s.Instrs[1].Deps)
	}
	s.Queues[0] = []megakernel.Item{q[1], q[0]}
	enc := s.Encode()
	stream, counters, status := alloc(len(enc)), alloc(4*(1+len(s.Instrs))), alloc(4*megakernel.StatusWords)
	if err := b.Write(stream, enc); err != nil {
		t.Fatal(err)
	}
	words := make([]byte, 4*megakernel.StatusWords)
	for _, c := range []struct {
		epoch uint32
		want  megakernel.Status
	}{
		{1, megakernel.Status{Why: megakernel.Stalled, Block: 0, Item: 0, Instr: 1, Part: 0, Counter: 0, Seen: 0, Need: 1}},
		{0, megakernel.Status{Why: megakernel.Refused, Seen: megakernel.StreamVersion, Need: megakernel.StreamVersion}},
	} {
		if err := b.Write(counters, make([]byte, 4*(1+len(s.Instrs)))); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(status, make([]byte, len(words))); err != nil {
			t.Fatal(err)
		}
		err := b.Launch(megakernel.Kernel, megakernel.Args{Stream: stream, Counters: counters, Status: status, SMs: 1, Epoch: c.epoch, Spins: 50, Shared: megakernel.MinShared})
		if err == nil {
			t.Fatalf("epoch %d: the launch did not fail", c.epoch)
		}
		if err := b.Read(words, status); err != nil {
			t.Fatal(err)
		}
		got, ok := megakernel.ParseStatus(words)
		if !ok || got != c.want {
			t.Errorf("epoch %d: status %+v (%v), want %+v", c.epoch, got, ok, c.want)
		}
		t.Logf("%s (%v)", got.Describe(s), err)
	}
}

// The same goldens in the weak-memory mode: blocks interleaved adversarially, each block's
// stores visible to the others only through the megakernel's release and acquire
// (VERITY_PTXVM_SWEEP: more seeds, queue counts and a small fixture).
func TestMegakernelGoldensWeak(t *testing.T) {
	want, err := fixtures.Goldens()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		fixture string
		sms     int
		seed    uint64
	}
	runs := []run{{"tiny-llama-q8_0", 3, 1}, {"tiny-q35moe-q4_0", 2, 1}}
	if sweep() {
		runs = nil
		for seed := uint64(1); seed <= 4; seed++ {
			runs = append(runs, run{"tiny-llama-q8_0", 2 + int(seed%3), seed}, run{"tiny-q35moe-q4_0", 2 + int(seed+1)%3, seed})
		}
		runs = append(runs, run{"small-llama-q4_k_m", 2, 1})
	}
	for _, c := range runs {
		t.Run(fmt.Sprintf("%s/sms=%d/seed=%d", c.fixture, c.sms, c.seed), func(t *testing.T) {
			file, err := fixtures.Bytes(c.fixture)
			if err != nil {
				t.Fatal(err)
			}
			b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: c.sms, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: c.seed}}})
			defer b.Close()
			g, err := fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, fixtures.GoldenOptions{Megakernel: true, SMs: c.sms})
			if err != nil {
				t.Fatal(err)
			}
			if d := g.Diff(want[c.fixture]); len(d) > 0 {
				t.Errorf("%v differ from the golden", d)
			}
			st := b.Stats()
			t.Logf("%d blocks, %d warp instructions", st.Blocks, st.WarpInstructions)
		})
	}
}

// megakernelMutations are the ways the megakernel's hand-off can lose its ordering: a
// fence deleted, or an acquire turned into a plain load, on the waiting side or the
// signalling side. Each is a regexp over the megakernel entry's PTX (every match replaced);
// a mutation whose pattern does not occur is for another version of the kernel.
var megakernelMutations = []struct {
	name, side string
	re         *regexp.Regexp
	repl       string
}{
	// main's kernel: atomicAdd(&done[d], 0) polls, __threadfence(), … __threadfence(); atomicAdd(&done[i], 1)
	{"fence after the poll deleted", "acquire", regexp.MustCompile(`(?s)(atom\.global\.add\.u32\s+%r\d+, \[%rd\d+\], 0;.*?)membar\.gl;`), "${1}// fence deleted"},
	{"poll by a plain load", "acquire", regexp.MustCompile(`atom\.global\.add\.u32\s+(%r\d+), \[(%rd\d+)\], 0;`), "ld.global.u32 $1, [$2];"},
	{"fence before the counter deleted", "release", regexp.MustCompile(`membar\.gl;((?:\n[^\n]*){0,6}?\n\s*(?:atom|red)\.global\.add\.u32\s+[^\n]*\], 1;)`), "// fence deleted$1"},
	// acquire/release counters: ld.acquire.gpu polls, red.release.gpu (or atom/st.release) signals
	{"ld.acquire made a plain load", "acquire", regexp.MustCompile(`ld\.acquire\.gpu\.`), "ld."},
	{"ld.acquire made relaxed", "acquire", regexp.MustCompile(`ld\.acquire\.gpu`), "ld.relaxed.gpu"},
	{"release made relaxed", "release", regexp.MustCompile(`\b(red|atom|st)\.release\.gpu`), "$1.relaxed.gpu"},
	// either kernel: the barrier before thread 0 signals (the release then covers only its own warp's stores)
	{"barrier before the signal deleted", "release", regexp.MustCompile(`bar\.sync \t0;(\n\s*@%p\d+ bra \t\$L__BB0_\d+;\n(?:[^\n]*\n){0,8}?\s*(?:red\.release\.gpu|membar\.gl))`), "// barrier deleted$1"},
	{"release fence deleted", "release", regexp.MustCompile(`fence\.(?:acq_rel|release)\.gpu;((?:\n[^\n]*){0,6}?\n\s*(?:red|atom|st)\.(?:relaxed\.gpu\.)?global\.[^\n]*)`), "// fence deleted$1"},
}

// mutateEntry returns the module's PTX with every match of re inside entry replaced, and
// whether there was one.
func mutateEntry(src, entry string, re *regexp.Regexp, repl string) (string, bool) {
	start := strings.Index(src, ".entry "+entry+"(")
	if start < 0 {
		return src, false
	}
	end := start + strings.Index(src[start:], "\n}\n")
	body := src[start:end]
	if !re.MatchString(body) {
		return src, false
	}
	return src[:start] + re.ReplaceAllString(body, repl) + src[end:], true
}

// Each mutation of the megakernel's hand-off is caught in the weak mode — a stale read
// reported, or the goldens differ — on every seed tried (VERITY_PTXVM_SWEEP: more seeds).
func TestMegakernelWeakCatchesMissingOrdering(t *testing.T) {
	const fixture, sms = "tiny-llama-q8_0", 3
	want, err := fixtures.Goldens()
	if err != nil {
		t.Fatal(err)
	}
	file, err := fixtures.Bytes(fixture)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ptx.Module(megakernel.Kernel.Module())
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{1, 2}
	if sweep() {
		seeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	}
	// golden runs the fixture on a backend with the megakernel's PTX replaced by mutated
	golden := func(mutated string, cfg ptxvm.Config) (fixtures.Golden, ptxvm.Stats, error) {
		b := ptxvm.New(ptxvm.Options{Config: cfg, Source: func(stem string) (string, error) {
			if stem == megakernel.Kernel.Module() {
				return mutated, nil
			}
			return ptx.Module(stem)
		}})
		defer b.Close()
		g, err := fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, fixtures.GoldenOptions{Megakernel: true, SMs: sms})
		return g, b.Stats(), err
	}
	sides := map[string]int{}
	reproduced := false
	for _, mu := range megakernelMutations {
		mutated, ok := mutateEntry(src, megakernel.Kernel.EntryName, mu.re, mu.repl)
		if !ok {
			continue
		}
		sides[mu.side]++
		t.Run(mu.name, func(t *testing.T) {
			for _, seed := range seeds {
				start := time.Now()
				cfg := ptxvm.Config{Workers: sms, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: seed}}
				g, st, err := golden(mutated, cfg)
				if !reproduced {
					// the same seed runs the same way: the same fault, after the same instructions
					_, st2, err2 := golden(mutated, cfg)
					if fmt.Sprint(err) != fmt.Sprint(err2) || st != st2 {
						t.Errorf("seed %d twice: %v (%+v) and %v (%+v)", seed, err, st, err2, st2)
					}
					reproduced = true
				}
				switch {
				case errors.Is(err, ptxvm.ErrStaleRead):
					t.Logf("seed %d: caught in %v: %v", seed, time.Since(start).Round(time.Millisecond), err)
				case err != nil:
					t.Errorf("seed %d: %v, want a stale read or a golden mismatch", seed, err)
				case len(g.Diff(want[fixture])) > 0:
					t.Logf("seed %d: caught in %v: %v differ from the golden", seed, time.Since(start).Round(time.Millisecond), g.Diff(want[fixture]))
				default:
					t.Errorf("seed %d: the mutated megakernel matches the goldens in the weak mode", seed)
				}
			}
			if sweep() {
				// the coherent mode, for comparison: it cannot see the missing ordering
				g, _, err := golden(mutated, ptxvm.Config{Workers: sms, NoRaceCheck: true})
				t.Logf("coherent mode: %v, differs from the golden in %v", err, g.Diff(want[fixture]))
			}
		})
	}
	if sides["acquire"] == 0 || sides["release"] == 0 {
		t.Fatalf("mutations applied per side: %v; the megakernel's hand-off changed: update megakernelMutations", sides)
	}
}

// sweep reports whether the longer weak-mode sweeps run (VERITY_PTXVM_SWEEP set).
func sweep() bool { return os.Getenv("VERITY_PTXVM_SWEEP") != "" }

// Past the items a block keeps in shared memory: a queue of more items than
// megakernel.CachedItems (a chain of adds on one SM, each waiting for the one before), and an
// item with more dependencies than megakernel.ItemDeps (the last add, declared to read every
// output of six independent adds on two SMs), read the rest from the stream and compute what
// the chain and the adds do.
func TestMegakernelPastTheItemCache(t *testing.T) {
	const n = 64
	for _, c := range []struct {
		name string
		sms  int
		ops  func(alloc func() device.Ptr, x device.Ptr) ([]megakernel.Op, device.Ptr, float32)
	}{
		{"long queue", 1, func(alloc func() device.Ptr, x device.Ptr) ([]megakernel.Op, device.Ptr, float32) {
			chain := megakernel.CachedItems + 40
			var ops []megakernel.Op
			prev := x
			for k := 0; k < chain; k++ { // y_k = y_{k-1} + x: (k + 2)·x
				y := alloc()
				ops = append(ops, megakernel.Op{Name: fmt.Sprint("add", k), Kernel: kernels.Add, Args: kernels.BinaryArgs{A: prev, B: x, Y: y, N: n},
					Reads: []megakernel.Resource{megakernel.Resource(k), 1000}, Writes: []megakernel.Resource{megakernel.Resource(k + 1)}, Bytes: 12 * n})
				prev = y
			}
			return ops, prev, float32(chain + 1)
		}},
		{"many dependencies", 2, func(alloc func() device.Ptr, x device.Ptr) ([]megakernel.Op, device.Ptr, float32) {
			deps := megakernel.ItemDeps + 2
			var ops []megakernel.Op
			var ys []device.Ptr
			var reads []megakernel.Resource
			for k := 0; k < deps; k++ { // y_k = x + x
				y := alloc()
				ys = append(ys, y)
				ops = append(ops, megakernel.Op{Name: fmt.Sprint("add", k), Kernel: kernels.Add, Args: kernels.BinaryArgs{A: x, B: x, Y: y, N: n},
					Reads: []megakernel.Resource{1000}, Writes: []megakernel.Resource{megakernel.Resource(k + 1)}, Bytes: 12 * n})
				reads = append(reads, megakernel.Resource(k+1))
			}
			z := alloc()
			ops = append(ops, megakernel.Op{Name: "last", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: ys[deps-1], B: ys[deps-2], Y: z, N: n},
				Reads: reads, Writes: []megakernel.Resource{100}, Bytes: 12 * n})
			return ops, z, 4
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: c.sms, NoRaceCheck: true}})
			defer b.Close()
			alloc := func(size int) device.Ptr {
				p, err := b.Alloc(int64(size))
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			x := alloc(4 * n)
			xs := make([]byte, 4*n)
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(xs[4*i:], math.Float32bits(float32(i%7)))
			}
			if err := b.Write(x, xs); err != nil {
				t.Fatal(err)
			}
			ops, out, times := c.ops(func() device.Ptr { return alloc(4 * n) }, x)
			s, err := megakernel.Build(ops, megakernel.Config{SMs: c.sms})
			if err != nil {
				t.Fatal(err)
			}
			longest := 0
			for _, q := range s.Queues {
				longest = max(longest, len(q))
			}
			most := 0
			for _, in := range s.Instrs {
				most = max(most, len(in.Deps))
			}
			if c.sms == 1 && longest <= megakernel.CachedItems || c.sms > 1 && most <= megakernel.ItemDeps {
				t.Fatalf("the longest queue has %d items, the most dependencies %d: within the cache", longest, most)
			}
			enc := s.Encode()
			stream, counters, status := alloc(len(enc)), alloc(4*(1+len(s.Instrs))), alloc(4*megakernel.StatusWords)
			if err := b.Write(stream, enc); err != nil {
				t.Fatal(err)
			}
			if err := b.Launch(megakernel.Kernel, megakernel.Args{Stream: stream, Counters: counters, Status: status, SMs: int32(c.sms), Epoch: 1,
				Spins: megakernel.DefaultSpins, Shared: megakernel.MinShared}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4*n)
			if err := b.Read(got, out); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if v, want := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])), times*float32(i%7); v != want {
					t.Fatalf("element %d: %v, want %v", i, v, want)
				}
			}
		})
	}
}
