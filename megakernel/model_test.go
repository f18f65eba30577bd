package megakernel_test

import (
	"math"
	"testing"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/perf"
	"verity/megakernel"
)

// approx reports whether a and b agree to a part in a million.
func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// The replay's arithmetic on schedules whose answer is known by hand: one part alone (its
// start, its bytes at a queue's share, the launch); a chain of two on two queues (a wake-up
// between them, one hand-off on the path); the second again, prefetching its stream while
// it waits (the fetched fraction from L2, at its latency's ratio or the L2's rate, whichever
// is slower); and the placement's own estimate equal to the replay of the schedule it built,
// with its queues' prefetch windows and without.
func TestPredictKnownAnswers(t *testing.T) {
	c := newChain(t, 1, 2, 0)
	mv, _ := kernels.MatVec(dtype.F32)
	m := megakernel.H200
	m.ItemCycles = m.WakeCycles + 60 // an item's start dearer than a hand-off: a chain's parts go to queues of their own
	us := func(cycles int) float64 { return float64(cycles) / (m.ClockGHz * 1e3) }
	share := m.BandwidthGBs * 1e3 / float64(m.SMs) // bytes per µs, one queue per SM
	const bytes = 1 << 20
	op := func(name string, reads, writes int, stream bool) megakernel.Op {
		o := megakernel.Op{Name: name, Kernel: mv, Args: kernels.MatVecArgs{W: c.bufs[0], X: c.bufs[1], Y: c.bufs[0], Rows: chainCols, Cols: chainCols, N: 1},
			Reads: []megakernel.Resource{megakernel.Resource(reads)}, Writes: []megakernel.Resource{megakernel.Resource(writes)}, Bytes: bytes}
		if stream {
			o.Stream = &megakernel.Stream{Param: 0, Bytes: bytes}
		}
		return o
	}

	one, err := megakernel.Build([]megakernel.Op{op("a", 1, 2, false)}, megakernel.Config{SMs: 1, PartBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	p, err := megakernel.Predict(one, m, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	part := bytes / share
	if want := us(m.ItemCycles) + part + m.LaunchUS; !approx(p.US, want) || !approx(p.PartsUS, part) || !approx(p.ItemsUS, us(m.ItemCycles)) || p.Handoffs != 0 {
		t.Errorf("one part: %+v, want %.3f µs", p, want)
	}
	if !approx(p.FloorUS, bytes/(m.BandwidthGBs*1e3)) || len(p.Path) != 1 || p.Path[0].Entry != mv.Entry() || p.Path[0].Limiter != "dram" {
		t.Errorf("one part: floor %.3f, path %+v", p.FloorUS, p.Path)
	}

	for _, stream := range []bool{false, true} {
		two, err := megakernel.Build([]megakernel.Op{op("a", 1, 2, false), op("b", 2, 3, stream)}, megakernel.Config{SMs: 2, Machine: &m, PartBytes: 1 << 30, PrefetchBytes: bytes})
		if err != nil {
			t.Fatal(err)
		}
		if len(two.Queues[0]) != 1 || len(two.Queues[1]) != 1 {
			t.Fatalf("two parts on two queues: %v", two.Queues)
		}
		p, err := megakernel.Predict(two, m, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		second, overrun := part, 0.0
		if stream { // b's block waits item + part while a runs and fetches at its share meanwhile, staging
			overrun = us(m.L2Latency) / 2 // the copying warps' last round
			waited := us(m.ItemCycles) + part + us(m.WakeCycles) + overrun
			f := math.Min(1, waited*share/bytes)
			l2share := m.L2GBs * 1e3 / float64(m.SMs) // an L2 hit's rate, a queue's share
			second = part*(1-f) + math.Max(part*f*float64(m.L2Latency)/float64(m.DRAMLatency), f*bytes/l2share)
			if p.Prefetched != int64(math.Min(bytes, waited*share)) {
				t.Errorf("prefetched %d bytes, want %.0f", p.Prefetched, math.Min(bytes, waited*share))
			}
		}
		want := us(m.ItemCycles) + part + us(m.WakeCycles) + overrun + second
		if !approx(p.ScheduleUS, want) || p.Handoffs != 1 || !approx(p.WakesUS, us(m.WakeCycles)+overrun) || !approx(p.PartsUS, part+second) {
			t.Errorf("a chain of two (stream %v): %+v, want %.3f µs", stream, p, want)
		}
	}

	c2 := newChain(t, 8, 4, 40)
	for _, window := range []int64{-1, 0, 4096} { // none, the default, one smaller than a part's stream
		for _, sms := range []int{1, 3, 8} {
			s, err := megakernel.Build(c2.ops, megakernel.Config{SMs: sms, Machine: &m, PrefetchBytes: window})
			if err != nil {
				t.Fatal(err)
			}
			p, err := megakernel.Predict(s, m, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !approx(p.ScheduleUS, s.EstimateUS) { // the placement times each part as the replay does
				t.Errorf("window %d, %d SMs: replay %.3f µs, placement's estimate %.3f µs", window, sms, p.ScheduleUS, s.EstimateUS)
			}
			if window != -1 && p.Prefetched == 0 {
				t.Errorf("window %d, %d SMs: nothing prefetched", window, sms)
			}
			if sum := p.PartsUS + p.ItemsUS + p.WakesUS; !approx(sum, p.ScheduleUS) {
				t.Errorf("window %d, %d SMs: the critical path's parts, starts and wakes add up to %.3f µs, the replay %.3f µs", window, sms, sum, p.ScheduleUS)
			}
		}
	}
	if _, err := megakernel.Predict(one, m, 0, nil); err == nil {
		t.Error("0 queues per SM accepted")
	}
}

// fixedModel times instruction 0's parts at a fixed time (a latency-bound part that moves few
// bytes) and the others at their bytes, as BytesModel does.
type fixedModel struct {
	us    float64
	bytes megakernel.BytesModel
}

func (f fixedModel) PartUS(in *megakernel.Instr, lo, hi, qps, queues int) (float64, string) {
	if in.Name == "a" {
		return f.us, "latency"
	}
	return f.bytes.PartUS(in, lo, hi, qps, queues)
}

// The window on one queue, by hand: item a (no stream) asks for b's stream before it starts;
// b's bytes come in while a's item starts, through a's own run (the bandwidth a, latency-bound,
// leaves unused) and while b waits for it — its item's start, or the poll that sees a's
// release (a hot wake) and its staging's last round if that is longer; b then reads that
// fraction from L2.
func TestPredictWindowAcrossItems(t *testing.T) {
	c := newChain(t, 1, 2, 0)
	mv, _ := kernels.MatVec(dtype.F32)
	m := megakernel.H200
	us := func(cycles int) float64 { return float64(cycles) / (m.ClockGHz * 1e3) }
	share := m.BandwidthGBs * 1e3 / float64(m.SMs)
	const bytes, small, run = 1 << 20, 1 << 10, 10.0
	args := kernels.MatVecArgs{W: c.bufs[0], X: c.bufs[1], Y: c.bufs[0], Rows: chainCols, Cols: chainCols, N: 1}
	ops := []megakernel.Op{
		{Name: "a", Kernel: mv, Args: args, Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: small},
		{Name: "b", Kernel: mv, Args: args, Reads: []megakernel.Resource{2}, Writes: []megakernel.Resource{3}, Bytes: bytes,
			Stream: &megakernel.Stream{Param: 0, Bytes: bytes}},
	}
	pm := fixedModel{run, megakernel.BytesModel{Machine: m}}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 1, PartBytes: 1 << 30, PrefetchBytes: bytes, Model: pm})
	if err != nil {
		t.Fatal(err)
	}
	if plan := s.PrefetchPlan(); len(plan[0][0]) != 1 || plan[0][0][0].To != bytes || len(plan[0][1]) != 0 {
		t.Fatalf("a's window: %+v", plan)
	}
	p, err := megakernel.Predict(s, m, 1, pm)
	if err != nil {
		t.Fatal(err)
	}
	gap := us(m.ItemCycles)
	if m.HotWakeCycles > m.ItemCycles { // b waits for the poll that sees a's release, then the copying warps' last round
		gap = us(m.HotWakeCycles) + us(m.L2Latency)/2
	}
	got := us(m.ItemCycles)*share + (run*share - small) + gap*share
	part := bytes / share
	f := got / bytes
	second := part*(1-f) + math.Max(part*f*float64(m.L2Latency)/float64(m.DRAMLatency), f*bytes/(m.L2GBs*1e3/float64(m.SMs)))
	want := us(m.ItemCycles) + gap + run + second
	// the replay counts bytes in whole numbers at each of its three steps
	if math.Abs(p.ScheduleUS-want) > 1e-3 || math.Abs(float64(p.Prefetched)-got) > 3 {
		t.Errorf("prefetched %d bytes, the step %.4f µs; want %.0f bytes, %.4f µs", p.Prefetched, p.ScheduleUS, got, want)
	}
}

// Staging, by hand: b's only part waits on a, which runs for run µs on another queue; in the
// meantime b's block fetches its window and copies its part's head to shared memory, so the
// window reaches past the copy: W + min(StageBytes, b's bytes) arrive before b runs.
func TestPredictStagingExtendsWindow(t *testing.T) {
	c := newChain(t, 1, 2, 0)
	mv, _ := kernels.MatVec(dtype.F32)
	const bytes, window, run = 1 << 20, 64 << 10, 1000.0
	args := kernels.MatVecArgs{W: c.bufs[0], X: c.bufs[1], Y: c.bufs[0], Rows: chainCols, Cols: chainCols, N: 1}
	ops := []megakernel.Op{
		{Name: "a", Kernel: mv, Args: args, Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: 1 << 10},
		{Name: "b", Kernel: mv, Args: args, Reads: []megakernel.Resource{2}, Writes: []megakernel.Resource{3}, Bytes: bytes,
			Stream: &megakernel.Stream{Param: 0, Bytes: bytes}},
	}
	for _, stage := range []int64{0, 128 << 10, 4 << 20} {
		m := megakernel.H200
		m.StageBytes = stage
		m.ItemCycles = m.WakeCycles + 60 // an item's start dearer than a hand-off: b goes to a queue of its own
		pm := fixedModel{run, megakernel.BytesModel{Machine: m}}
		s, err := megakernel.Build(ops, megakernel.Config{SMs: 2, Machine: &m, PartBytes: 1 << 30, PrefetchBytes: window, Model: pm})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Queues[0]) != 1 || len(s.Queues[1]) != 1 {
			t.Fatalf("queues %v: want a and b on queues of their own", s.Queues)
		}
		p, err := megakernel.Predict(s, m, 1, pm)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(window+stage, bytes); p.Prefetched != want { // the stream ends at b's bytes
			t.Errorf("staging %d bytes: %d bytes of b's stream arrived before it ran, want %d", stage, p.Prefetched, want)
		}
	}
}

// The runner's shared memory: the opt-in less the L1's room, never less than the bodies' buffer
// and the book, a multiple of 16; what stages is that less the book.
func TestLaunchShared(t *testing.T) {
	for _, c := range []struct {
		optin int64
		want  uint32
	}{{0, megakernel.MinShared}, {48 << 10, megakernel.MinShared}, {96 << 10, 64 << 10}, {227 << 10, 195 << 10}, {163<<10 + 7, 131 << 10}, {1 << 10, megakernel.MinShared}} {
		got := megakernel.LaunchShared(c.optin)
		if got != c.want || got%16 != 0 {
			t.Errorf("LaunchShared(%d) = %d, want %d", c.optin, got, c.want)
		}
	}
	if megakernel.MinShared%16 != 0 || megakernel.MinShared < megakernel.SharedBytes+megakernel.BookBytes {
		t.Errorf("MinShared %d", megakernel.MinShared)
	}
	if got := megakernel.StageBytes(195 << 10); got != 195<<10-megakernel.BookBytes {
		t.Errorf("StageBytes(195 KiB) = %d", got)
	}
	if m := megakernel.H200; m.StageBytes != 195<<10-megakernel.BookBytes { // 227 KiB may opt in
		t.Errorf("the H200 stages %d bytes", m.StageBytes)
	}
	if m := megakernel.MachineFor(perf.Cards["A100"]); m.StageBytes != 131<<10-megakernel.BookBytes { // 163 KiB
		t.Errorf("the A100 stages %d bytes", m.StageBytes)
	}
}

// The static model inside a step: an instruction that reads what an earlier one wrote finds it
// in the L2 (its waits an L2 trip, not a DRAM one), one that reads only the step's inputs is
// timed as its own launch (less prefetches, which neither makes).
func TestKernelModelFindsWhatTheStepWrote(t *testing.T) {
	c := newChain(t, 3, 4, 0)
	card := perf.Cards["H200"]
	km := megakernel.NewKernelModel(card)
	first := kernels.BinaryArgs{A: c.bufs[0], B: c.bufs[1], Y: c.bufs[2], N: chainN}
	second := kernels.BinaryArgs{A: c.bufs[2], B: c.bufs[2], Y: c.bufs[3], N: chainN} // both inputs what a wrote
	ops := []megakernel.Op{
		{Name: "a", Kernel: kernels.Add, Args: first, Reads: []megakernel.Resource{0, 1}, Writes: []megakernel.Resource{2}, Bytes: 12 * chainN},
		{Name: "b", Kernel: kernels.Add, Args: second, Reads: []megakernel.Resource{2}, Writes: []megakernel.Resource{3}, Bytes: 12 * chainN},
	}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 2, Model: km})
	if err != nil {
		t.Fatal(err)
	}
	for i, args := range []kernels.BinaryArgs{first, second} {
		alone, err := perf.PredictWith(card, kernels.Add, args, perf.Options{Unprefetched: true})
		if err != nil {
			t.Fatal(err)
		}
		in := km.Prediction(&s.Instrs[i])
		if in == nil {
			t.Fatalf("%s: no prediction", s.Instrs[i].Name)
		}
		if i == 0 && in.WarpCycles != alone.WarpCycles || i == 1 && in.WarpCycles >= alone.WarpCycles {
			t.Errorf("%s: a warp's lifetime %.0f cycles in the step, %.0f as a launch of its own", s.Instrs[i].Name, in.WarpCycles, alone.WarpCycles)
		}
	}
}
