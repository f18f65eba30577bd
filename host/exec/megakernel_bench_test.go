package exec_test

import (
	"testing"

	"verity/device"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
	"verity/megakernel"
)

// null is a backend that hands out addresses and runs nothing: what the host does for a step,
// without a device's time.
type null struct{ next device.Ptr }

func (n *null) Name() string { return "null" }
func (n *null) Alloc(size int64) (device.Ptr, error) {
	if n.next == 0 {
		n.next = 1 << 32
	}
	p := n.next
	n.next += device.Ptr((size + 4096 + 255) &^ 255)
	return p, nil
}
func (n *null) Upload(data []byte) (device.Ptr, error) { return n.Alloc(int64(len(data))) }
func (n *null) Free(device.Ptr) error                  { return nil }
func (n *null) Write(device.Ptr, []byte) error         { return nil }
func (n *null) Read(dst []byte, _ device.Ptr) error {
	clear(dst)
	return nil
}
func (n *null) Launch(device.Spec, any) error                { return nil }
func (n *null) Sync() error                                  { return nil }
func (n *null) Close() error                                 { return nil }
func (n *null) Multiprocessors() (int, error)                { return 132, nil }
func (n *null) ResidentBlocks(device.Spec, any) (int, error) { return 132, nil }

// target is the design's target step on the null backend: an executor of llama-1b-bf16 with
// room for 8 rows after 2048 positions, and one such step's inputs (a chain of 8 nodes).
func target(b *testing.B) (*exec.Executor, exec.Step) {
	e := targetExecutor(b, 2048+8)
	return e, chainStep(2048, 8)
}

// targetExecutor is an executor of llama-1b-bf16 on the null backend with room for 8 rows
// and slots cache slots.
func targetExecutor(b *testing.B, slots int) *exec.Executor {
	if testing.Short() {
		b.Skip("generates llama-1b-bf16 (2.3 GB) on first use")
	}
	path, err := fixtures.Path("llama-1b-bf16")
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	p, err := model.Build(f)
	if err != nil {
		b.Fatal(err)
	}
	e, err := exec.New(&null{}, p, exec.Options{MaxRows: 8, NSlots: slots})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// chainStep is a step of a chain of rows nodes after history positions, in slots history ….
func chainStep(history, rows int) exec.Step {
	s := exec.Step{}
	for i := 0; i < rows; i++ {
		keys := make([]int32, 0, history+rows)
		for k := 0; k < history; k++ {
			keys = append(keys, int32(k))
		}
		for j := 0; j <= i; j++ { // a chain: node i's ancestors are 0 … i
			keys = append(keys, int32(history+j))
		}
		s.Tokens = append(s.Tokens, int32(i+1))
		s.Pos = append(s.Pos, int32(history+i))
		s.Slots = append(s.Slots, int32(history+i))
		s.Keys = append(s.Keys, keys)
		s.OutRows = append(s.OutRows, int32(i))
	}
	return s
}

// BenchmarkMegakernelBuild is what a step of the design's target cost the host before
// schedules were kept: lowering its ops, building its schedule for 132 queues and encoding
// the stream.
func BenchmarkMegakernelBuild(b *testing.B) {
	e, _ := target(b)
	cfg := megakernel.Config{SMs: 132}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := e.Schedule(8, 8, 8*2049, cfg)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Encode()
	}
}

// BenchmarkMegakernelHostStep is the host's work for one step of the design's target — an
// 8-node tree verify after 2048 positions of llama-1b-bf16 on 132 SMs, as one megakernel
// launch — on a backend that runs nothing: writing the step's inputs, lowering its ops,
// finding (or building) its schedule and launching it. The driver's own time for the copies
// and the launch is not in it, nor reading the logits back (they stay on the device).
func BenchmarkMegakernelHostStep(b *testing.B) {
	e, s := target(b)
	r, err := exec.NewMegakernelRunner(e.Backend(), 0)
	if err != nil {
		b.Fatal(err)
	}
	e.UseMegakernel(r)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := e.Launch(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMegakernelHostProtocol is the host's work per call of the seed workload's protocol
// (verity bench --protocol seed001): 8-node verifies after 2048, 2056, … 2552 positions of
// llama-1b-bf16, the 64 calls that fill a cache of 2560 slots. The attention's chunk count
// grows every 8 calls, which changes its launch: the step patches the kept schedule (new
// arguments, the same placement) rather than building one. run: each run of 64 calls on a
// fresh megakernel whose first schedule was built before the timer (BuildModel's, untimed),
// so 7 patches and encodings in 64 calls; kept: the 64 calls cycled, every shape's schedule
// and stream kept.
func BenchmarkMegakernelHostProtocol(b *testing.B) {
	const calls = 64
	e := targetExecutor(b, 2048+8*calls)
	steps := make([]exec.Step, calls)
	for i := range steps {
		steps[i] = chainStep(2048+8*i, 8)
	}
	fresh := func() *exec.Megakernel {
		r, err := exec.NewMegakernelRunner(e.Backend(), 0)
		if err != nil {
			b.Fatal(err)
		}
		m := e.UseMegakernel(r)
		if err := e.Launch(steps[0]); err != nil { // the build
			b.Fatal(err)
		}
		return m
	}
	b.Run("run", func(b *testing.B) {
		var m *exec.Megakernel
		builds, patched := 0, 0
		b.ReportAllocs()
		for i := range b.N {
			if i%calls == 0 {
				b.StopTimer()
				if m != nil {
					builds, patched = builds+m.Builds-1, patched+m.Patched
				}
				m = fresh()
				b.StartTimer()
			}
			if err := e.Launch(steps[i%calls]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		builds, patched = builds+m.Builds-1, patched+m.Patched
		b.ReportMetric(float64(builds)/float64(b.N), "builds/call")
		b.ReportMetric(float64(patched)/float64(b.N), "patches/call")
	})
	b.Run("kept", func(b *testing.B) {
		m := fresh()
		for _, s := range steps {
			if err := e.Launch(s); err != nil {
				b.Fatal(err)
			}
		}
		builds, patched := m.Builds, m.Patched
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := e.Launch(steps[i%calls]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(m.Builds-builds)/float64(b.N), "builds/call")
		b.ReportMetric(float64(m.Patched-patched)/float64(b.N), "patches/call")
	})
}
