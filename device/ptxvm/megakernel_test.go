package ptxvm_test

import (
	"testing"

	"verity/device"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/fixtures"
	"verity/megakernel"
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
	}{{"tiny-llama-q8_0", 3}, {"tiny-q35moe-q4_0", 2}, {"small-llama-q4_k_m", 2}} { // the last: q8_K activations, a body that has its block to itself
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
			// one launch of sms blocks per step (18 steps), where op-by-op launches run thousands
			st := b.Stats()
			t.Logf("%d blocks, %d warp instructions", st.Blocks, st.WarpInstructions)
			if st.Blocks != int64(18*c.sms) {
				t.Errorf("%d blocks ran, want 18 steps × %d SMs", st.Blocks, c.sms)
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
		{0, megakernel.Status{Why: megakernel.Refused, Seen: 2, Need: 2}},
	} {
		if err := b.Write(counters, make([]byte, 4*(1+len(s.Instrs)))); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(status, make([]byte, len(words))); err != nil {
			t.Fatal(err)
		}
		err := b.Launch(megakernel.Kernel, megakernel.Args{Stream: stream, Counters: counters, Status: status, SMs: 1, Epoch: c.epoch, Spins: 50})
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
