//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/device/cuda"
	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/exec"
	"verity/megakernel"
)

var goldensPath = flag.String("goldens", "../../fixtures/testdata/goldens.json",
	"the goldens file (the default is right when the test runs in its package directory)")

// TestGoldens computes the golden hashes of every fixture in the goldens file (the tiny and
// small catalogue fixtures) on the GPU, with the eager executor, and compares them with the
// committed ones, which the CPU twin computes. The fixtures are generated in memory, on every
// CPU at once, before the first GPU run.
func TestGoldens(t *testing.T) {
	b := open(t)
	goldens(t, "goldens", func(name string, file []byte) (fixtures.Golden, error) {
		gc, _ := fixtures.ParseGoldenName(name)
		return fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, gc.Options(fixtures.GoldenOptions{}))
	}, b)
}

// TestMegakernelGoldens is TestGoldens with every step one launch of the megakernel, one
// thread block per SM.
func TestMegakernelGoldens(t *testing.T) {
	b := open(t)
	goldens(t, "goldens_megakernel", func(name string, file []byte) (fixtures.Golden, error) {
		gc, _ := fixtures.ParseGoldenName(name)
		return fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, gc.Options(fixtures.GoldenOptions{Megakernel: true}))
	}, b)
}

// TestGoldensSplit is TestGoldens with the layers split at the middle layer into two pipeline
// stages: on two contexts of the one GPU (cuda:0,cuda:0, the layout of a K80's two dies), and
// on the GPU and the CPU twin (cuda:0,cpu). The hashes must again equal the committed ones, and
// the hand-offs between the stages (the residual stream, copied through the host) are timed.
func TestGoldensSplit(t *testing.T) {
	first := open(t)
	second := open(t) // a context of its own on the same device
	twin := cpu.New(0)
	t.Cleanup(func() { twin.Close() })
	for _, l := range []struct {
		name     string
		backends []device.Backend
	}{{"cuda:0,cuda:0", []device.Backend{first, second}}, {"cuda:0,cpu", []device.Backend{first, twin}}} {
		t.Run(l.name, func(t *testing.T) {
			var handoffs exec.HandoffStats
			goldens(t, "goldens_split", func(name string, file []byte) (fixtures.Golden, error) {
				gc, err := fixtures.ParseGoldenName(name)
				if err != nil {
					return fixtures.Golden{}, err
				}
				if gc.CacheK != dtype.F32 || gc.CacheV != dtype.F32 {
					return fixtures.Golden{}, fmt.Errorf("a golden with 16-bit caches: %w", device.ErrUnsupported)
				}
				s, err := fixtures.Lookup(name)
				if err != nil {
					return fixtures.Golden{}, err
				}
				if s.NLayer < 2 {
					return fixtures.Golden{}, fmt.Errorf("%d layers: nothing to split: %w", s.NLayer, device.ErrUnsupported)
				}
				g, st, err := goldenSplit(file, l.backends, []int{s.NLayer / 2})
				handoffs.Count += st.Count
				handoffs.Bytes += st.Bytes
				handoffs.Time += st.Time
				return g, err
			}, l.backends[0])
			rec := map[string]any{"layout": l.name, "handoffs": handoffs.Count, "bytes": handoffs.Bytes, "seconds": handoffs.Time.Seconds()}
			if handoffs.Count > 0 {
				rec["us_per_handoff"] = us(handoffs.Time) / float64(handoffs.Count)
				rec["bytes_per_handoff"] = float64(handoffs.Bytes) / float64(handoffs.Count)
				rec["gb_s"] = float64(handoffs.Bytes) / handoffs.Time.Seconds() / 1e9
			}
			record(t, "handoff", rec)
			t.Logf("%s: %d hand-offs, %d bytes, %v", l.name, handoffs.Count, handoffs.Bytes, handoffs.Time)
		})
	}
}

// goldenSplit computes a fixture's golden split across backends at firstLayers, as
// fixtures.ComputeGoldenSplit does, and returns the pipeline's hand-offs as well.
func goldenSplit(file []byte, backends []device.Backend, firstLayers []int) (fixtures.Golden, exec.HandoffStats, error) {
	var st exec.HandoffStats
	g, err := fixtures.ComputeGoldenSplit(file, backends, firstLayers, fixtures.GoldenOptions{
		Runner: func(r exec.Runner) {
			if pl, ok := r.(*exec.Pipeline); ok {
				st = pl.Handoffs()
			}
		},
	})
	return g, st, err
}

// goldens generates every fixture of the goldens file, computes each one's golden with run
// and compares it with the committed one; b is the GPU backend, for tracing a mismatch op by
// op against the twins.
func goldens(t *testing.T, kind string, run func(name string, file []byte) (fixtures.Golden, error), b device.Backend) {
	want, err := fixtures.ReadGoldens(*goldensPath)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)

	start := time.Now()
	files := make([][]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			gc, err := fixtures.ParseGoldenName(name)
			if err != nil {
				errs[i] = err
				return
			}
			s, err := fixtures.Lookup(gc.Fixture)
			if err != nil {
				errs[i] = err
				return
			}
			var buf bytes.Buffer
			_, errs[i] = fixtures.WriteTo(&buf, s, nil)
			files[i] = buf.Bytes()
		}()
	}
	wg.Wait()
	gen := time.Since(start)
	t.Logf("generated %d fixtures in %v", len(names), gen)

	start = time.Now()
	var match, mismatch, failed, unsupported []string
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			if errs[i] != nil {
				failed = append(failed, name)
				t.Fatal(errs[i])
			}
			file := files[i]
			files[i] = nil
			g, err := run(name, file)
			if errors.Is(err, device.ErrUnsupported) {
				unsupported = append(unsupported, name)
				t.Skip(err)
			}
			if err != nil {
				failed = append(failed, name)
				var stall *megakernel.StallError
				if errors.As(err, &stall) { // the megakernel gave up: its status words, for the report
					record(t, "megakernel_stall", map[string]any{"fixture": name, "status": stall.Status, "error": err.Error()})
				}
				t.Fatal(err)
			}
			if diff := g.Diff(want[name]); diff != nil {
				mismatch = append(mismatch, name)
				t.Errorf("%v differ from the golden: got %+v, want %+v", diff, g, want[name])
				// where: the first op whose output differs from the twin's, run op by op (for
				// the first few fixtures that differ: a systematic difference would take long)
				if len(mismatch) > 3 {
					return
				}
				twin := cpu.New(0)
				defer twin.Close()
				if d, err := fixtures.FirstDifference(file, []device.Backend{twin}, []device.Backend{b}); err != nil {
					t.Errorf("tracing: %v", err)
				} else if d != nil {
					t.Errorf("CPU twins vs GPU, op by op:\n%s", d)
				} else {
					t.Errorf("op by op (eager), every output equals the twin's")
				}
				return
			}
			match = append(match, name)
		})
		if errors.Is(cuda.Lost(), device.ErrDeviceLost) {
			failed = append(failed, names[i+1:]...)
			t.Errorf("the device was lost at %s: %d fixtures not run", name, len(names)-i-1)
			break
		}
	}
	run_s := time.Since(start)
	rec := map[string]any{"fixtures": len(names), "match": len(match), "mismatch": mismatch,
		"failed": failed, "unsupported": unsupported, "generate_s": gen.Seconds(), "run_s": run_s.Seconds()}
	if strings.Contains(t.Name(), "/") {
		rec["layout"] = t.Name()[strings.Index(t.Name(), "/")+1:]
	}
	record(t, kind, rec)
}
