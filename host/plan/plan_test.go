package plan_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/machine"
	"verity/host/plan"
)

func open(t *testing.T, name string) *gguf.File {
	t.Helper()
	path, err := fixtures.Path(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func loadMachine(t *testing.T) *machine.Machine {
	t.Helper()
	m, err := machine.Load()
	if err != nil {
		t.Skipf("no memory figures here: %v", err)
	}
	return m
}

// With room to spare the default context is the trained one; in a small budget it is the
// largest whose K/V cache fits the share of what the weights leave.
func TestContext(t *testing.T) {
	m := loadMachine(t)
	f := open(t, "small-llama-q4_k_m")
	be := cpu.New(1)
	defer be.Close()
	pl, err := plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Context != pl.TrainedContext || pl.ContextFrom != "trained" || pl.KVBytes != pl.KVPerPosition*int64(pl.Context+pl.MaxRows) {
		t.Errorf("plenty of memory: context %d (%s), trained %d, K/V %d at %d a position", pl.Context, pl.ContextFrom, pl.TrainedContext, pl.KVBytes, pl.KVPerPosition)
	}
	if pl.Weights.Packed == "" || pl.Weights.Streaming || len(pl.Rationale) == 0 {
		t.Errorf("weights %+v, rationale %q", pl.Weights, pl.Rationale)
	}
	// a budget of 30 MiB: the K/V cache takes a quarter of what is left beside the weights
	const budget = 30 << 20
	small, err := plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Budget: budget, Sessions: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if small.ContextFrom != "memory" || small.Context >= pl.TrainedContext {
		t.Fatalf("30 MiB: context %d (%s)", small.Context, small.ContextFrom)
	}
	kv := small.KVPerPosition * int64(2*small.Context+small.MaxRows)
	if kv > int64(plan.HostKVShare*float64(small.Usable)) || kv+2*64*small.KVPerPosition < int64(plan.HostKVShare*float64(small.Usable))-small.KVPerPosition*int64(small.MaxRows) {
		t.Errorf("30 MiB: K/V %d for 2 × %d positions, a quarter of %d usable is %d", kv, small.Context, small.Usable, int64(plan.HostKVShare*float64(small.Usable)))
	}
	if small.Usable > budget || small.Usable <= 0 {
		t.Errorf("usable %d of a %d budget", small.Usable, budget)
	}
	// a requested context past the trained one is warned about; one past memory refused
	long, err := plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Context: 4096}})
	if err != nil || long.Context != 4096 || len(long.Warnings) == 0 || !strings.Contains(long.Warnings[0], "trained for") {
		t.Errorf("a long context: %v, %+v", err, long)
	}
	_, err = plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Context: 1 << 30}})
	var me *engine.MemoryError
	if !errors.As(err, &me) || me.MaxContext <= 0 {
		t.Errorf("a context past memory: %v", err)
	}
	_, err = plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Budget: 1 << 20}})
	if !errors.Is(err, engine.ErrMemory) {
		t.Errorf("a 1 MiB budget: %v", err)
	}
}

// A model larger than the memory left streams: the plan says which segments stay and how many
// bytes a step reads.
func TestStreamingPlan(t *testing.T) {
	m := loadMachine(t)
	f := open(t, "small-q35moe-q4_k_m")
	be := cpu.New(1)
	defer be.Close()
	pl, err := plan.Make(f, "q35", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Budget: 40 << 20, Context: 64}})
	if err != nil {
		t.Fatal(err)
	}
	w := pl.Weights
	if !w.Streaming || w.StreamedBytes <= 0 || len(w.Streamed) == 0 || w.StreamedBytes >= w.Mapped {
		t.Errorf("weights %+v", w)
	}
	t.Logf("%d resident %v, %d streamed, %d bytes a step: %q", len(w.Resident), w.Resident, len(w.Streamed), w.StreamedBytes, pl.Rationale)
}

// fakeGPU is a CPU backend that reports a device's memory and SMs and times copies at a set
// rate: a GPU for the planner.
type fakeGPU struct {
	*cpu.Backend
	name   string
	memory int64
	rate   float64 // bytes/s a copy moves (2·n per copy of n)
}

func (g *fakeGPU) Name() string                            { return g.name }
func (g *fakeGPU) TotalMemory() (int64, error)             { return g.memory, nil }
func (g *fakeGPU) Multiprocessors() (int, error)           { return 132, nil }
func (g *fakeGPU) Copy(dst, src device.Ptr, n int64) error { return nil }
func (g *fakeGPU) Time(f func() error) (time.Duration, error) {
	return time.Duration(2 * 512 << 20 / g.rate * 1e9), f() // the measurement copies 512 MiB
}

// On GPUs the layers are placed by each device's memory and the rates are modelled from the
// measured bandwidth.
func TestGPUPlan(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir()) // the fake devices' measurements stay out of the real cache
	m := loadMachine(t)
	f := open(t, "small-llama-q4_k_m")
	a := &fakeGPU{Backend: cpu.New(1), name: "gpu a", memory: 9 << 20, rate: 3e12}
	b := &fakeGPU{Backend: cpu.New(1), name: "gpu b", memory: 80 << 30, rate: 3e12}
	defer a.Close()
	defer b.Close()
	for _, g := range []*fakeGPU{a, b} {
		gm, ok, err := machine.MeasureGPU(g)
		if !ok || err != nil || gm.MemoryBytes != g.memory || gm.SMs != 132 {
			t.Fatalf("measure %s: %+v %v %v", g.name, gm, ok, err)
		}
		m.SetGPU(gm)
	}
	pl, err := plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{a, b}, Load: engine.LoadOptions{Context: 256}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Stages) != 2 || !pl.Stages[0].GPU || pl.Stages[0].Need > pl.Stages[0].Memory || pl.Stages[1].Layers[1] != 4 || pl.Stages[0].Layers[1] != pl.Stages[1].Layers[0] {
		t.Fatalf("stages %+v", pl.Stages)
	}
	if err := pl.Predict(m, 1, plan.Workload{}); err != nil {
		t.Fatal(err)
	}
	pr := pl.Predicted
	if !pr.Modelled || pr.DecodeTPS <= 0 || pr.PrefillTPS <= pr.DecodeTPS || pr.VerifyUS <= 0 {
		t.Errorf("prediction %+v", pr)
	}
	// the default context takes most of what the devices' weights leave
	pl, err = plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.ContextFrom == "requested" {
		t.Errorf("context %d from %s", pl.Context, pl.ContextFrom)
	}
	// too much for the devices: refused, naming the device
	_, err = plan.Make(f, "small", m, plan.Options{Backends: []device.Backend{a}, Load: engine.LoadOptions{Context: 1 << 20}})
	var me *engine.MemoryError
	if !errors.As(err, &me) || me.Where != "gpu a" {
		t.Errorf("too much for one device: %v", err)
	}
}

// The twin's prediction is made from kernels timed here, and says so.
func TestPredictTwin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: times kernels")
	}
	if os.Getenv("VERITY_CACHE") == "" {
		t.Setenv("VERITY_CACHE", t.TempDir())
	}
	m := loadMachine(t)
	for _, c := range []struct {
		fixture string
		how     string // what the prediction's account must say
	}{
		{"tiny-llama-q8_0", "synthetic model with the same attention shape"},
		// a hybrid's GDN ops are timed in a synthetic GDN layer of its shape, not guessed from bytes
		{"tiny-q35moe-q8_0", "a Gated DeltaNet layer of the target's shape"},
		// a qwen3's width is not its heads': its synthetic model has the target's
		{"small-qwen3moe-q4_k_m", "the target's width (256)"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			f := open(t, c.fixture)
			be := cpu.New(2)
			defer be.Close()
			pl, err := plan.Make(f, "tiny", m, plan.Options{Backends: []device.Backend{be}, Load: engine.LoadOptions{Context: 256}})
			if err != nil {
				t.Fatal(err)
			}
			if err := pl.Predict(m, 2, plan.Workload{Prompt: 64, Decode: 16}); err != nil {
				t.Fatal(err)
			}
			pr := pl.Predicted
			if pr.Modelled || pr.DecodeTPS <= 0 || pr.PrefillTPS <= 0 || pr.VerifyUS <= 0 || len(pr.How) == 0 || pr.Bound == "" {
				t.Errorf("prediction %+v", pr)
			}
			if !strings.Contains(strings.Join(pr.How, "\n"), c.how) {
				t.Errorf("the prediction's account does not say %q:\n%s", c.how, strings.Join(pr.How, "\n"))
			}
			t.Logf("%+v", pr)
		})
	}
}
