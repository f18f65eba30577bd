//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"flag"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
)

var goldensPath = flag.String("goldens", "../../fixtures/testdata/goldens.json",
	"the goldens file (the default is right when the test runs in its package directory)")

// TestGoldens computes the golden hashes of every fixture in the goldens file (the tiny and
// small catalogue fixtures) on the GPU, with the eager executor, and compares them with the
// committed ones, which the CPU twin computes. The fixtures are generated in memory, on every
// CPU at once, before the first GPU run.
func TestGoldens(t *testing.T) { goldens(t, "goldens", fixtures.GoldenOptions{}) }

// TestMegakernelGoldens is TestGoldens with every step one launch of the megakernel, one
// thread block per SM.
func TestMegakernelGoldens(t *testing.T) {
	goldens(t, "goldens_megakernel", fixtures.GoldenOptions{Megakernel: true})
}

func goldens(t *testing.T, kind string, o fixtures.GoldenOptions) {
	want, err := fixtures.ReadGoldens(*goldensPath)
	if err != nil {
		t.Fatal(err)
	}
	b := open(t)
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
			s, err := fixtures.Lookup(name)
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
			g, err := fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, o)
			if errors.Is(err, device.ErrUnsupported) {
				unsupported = append(unsupported, name)
				t.Skip(err)
			}
			if err != nil {
				failed = append(failed, name)
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
	}
	run := time.Since(start)
	record(t, kind, map[string]any{"fixtures": len(names), "match": len(match), "mismatch": mismatch,
		"failed": failed, "unsupported": unsupported, "generate_s": gen.Seconds(), "run_s": run.Seconds()})
}
