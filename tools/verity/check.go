package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/lora"
)

func newCheckCmd() *cobra.Command {
	var backend string
	var layers []int
	var threads, sms int
	var megakernel, trace, asJSON bool
	var adapters loraFlags
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "check [FIXTURE ...]",
		Short: "Check a backend bit for bit against the committed golden hashes",
		Long: `Run each fixture's golden workload — prefill of an 80-token prompt, verification of an
8-node draft tree after it, 16 greedy decode steps — on --backend and compare the SHA-256 of
every logit bit and the greedy tokens with the hashes committed with this version of Verity.
Every backend must reproduce them exactly: the CPU twins, the PTX interpreter and a GPU.
Without arguments every fixture with a golden is checked (generated once and cached, see
verity fixture). The exit status is 1 if any fixture differs. With --trace, each fixture that
differs is run again op by op on the backend and on the CPU twins to find the first op whose
output is not bit-identical, and how its values differ (ulp distances). The merged fixtures,
MODEL+ADAPTER, are the model with a catalogue LoRA adapter merged at load. --lora merges
adapters into every fixture checked: at scale 0 each golden must still hold.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			goldens, err := fixtures.Goldens()
			if err != nil {
				return err
			}
			merged, err := fixtures.MergedGoldens()
			if err != nil {
				return err
			}
			for k, g := range merged {
				goldens[k] = g
			}
			uses, lo, done, err := adapters.open(cmd)
			if err != nil {
				return err
			}
			defer done()
			names := args
			if len(names) == 0 {
				for n := range goldens {
					names = append(names, n)
				}
				sort.Strings(names)
			}
			if cache.k != "" || cache.v != "" { // only the goldens of these cache types
				kt, vt, err := cache.typesFor(false)
				if err != nil {
					return err
				}
				var keep []string
				for _, n := range names {
					if gc, err := fixtures.ParseGoldenName(n); err == nil && gc.CacheK == kt && gc.CacheV == vt {
						keep = append(keep, n)
					}
				}
				names = keep
			}
			for _, n := range names {
				if _, ok := goldens[n]; !ok {
					return fmt.Errorf("no golden for %q (fixtures with goldens: %s)", n, strings.Join(sortedKeys(goldens), ", "))
				}
			}
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			mode := ""
			if megakernel {
				mode = " (megakernel)"
			}
			rows := checkRows{w: cmd.OutOrStdout(), json: asJSON, backend: backendsName(bes), megakernel: megakernel}
			if !asJSON {
				fmt.Fprintf(cmd.OutOrStdout(), "backend: %s%s\n", backendsName(bes), mode)
			}
			// One row per fixture as soon as it is done (a ptxvm run takes minutes); a fixture
			// that cannot run is a row too, and the others still run.
			width := len("fixture")
			for _, n := range names {
				width = max(width, len(n))
			}
			rows.width = width
			rows.header()
			failed := 0
			var differ []string
			files := map[string][]byte{}
			prog := newJobProgress(cmd.ErrOrStderr(), len(names), "check", false, false)
			defer prog.Finish()
			for _, n := range names {
				prog.Start(n)
				start := time.Now()
				file, g, err := checkFixture(n, bes, layers, fixtures.GoldenOptions{Megakernel: megakernel, SMs: sms, Adapters: uses, LoRA: lo}, cmd)
				if err != nil {
					failed++
					prog.Above(func() { rows.row(checkRow{Fixture: n, Error: err.Error(), Seconds: time.Since(start).Seconds()}) })
					prog.Done()
					continue
				}
				bad := map[string]bool{}
				for _, d := range g.Diff(goldens[n]) {
					bad[d] = true
				}
				if len(bad) > 0 {
					failed++
					differ = append(differ, n)
					files[n] = file
				}
				mark := func(k string) string {
					if bad[k] {
						return "DIFFERS"
					}
					return "ok"
				}
				prog.Above(func() {
					rows.row(checkRow{Fixture: n, Prefill: mark("prefill"), Verify: mark("verify"), Greedy: mark("greedy"), Seconds: time.Since(start).Seconds()})
				})
				prog.Done()
			}
			prog.Finish()
			if trace {
				twin := cpu.New(threads)
				defer twin.Close()
				for _, n := range differ {
					d, err := fixtures.FirstDifference(files[n], []device.Backend{twin}, bes)
					if asJSON {
						tr := checkTrace{Fixture: n}
						switch {
						case err != nil:
							tr.Error = err.Error()
						case d != nil:
							tr.FirstDifference = d.String()
						}
						rows.emit(tr)
						continue
					}
					switch {
					case err != nil:
						fmt.Fprintf(cmd.OutOrStdout(), "\n%s: tracing failed: %v\n", n, err)
					case d == nil:
						fmt.Fprintf(cmd.OutOrStdout(), "\n%s: op by op, every output equals the twin's (the difference is in a mode --trace does not trace, such as --megakernel)\n", n)
					default:
						fmt.Fprintf(cmd.OutOrStdout(), "\n%s (first run: the CPU twins; second: %s):\n%s\n", n, backendsName(bes), d)
					}
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d fixtures differ from their goldens or could not run on %s", failed, len(names), backendsName(bes))
			}
			if asJSON {
				return nil
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "all %d fixtures bit-identical to their goldens\n", len(names))
			return err
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cache.add(cmd)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per fixture as it finishes (JSON lines: fixture, backend, megakernel, prefill, verify, greedy, seconds, error), and one per traced fixture")
	cmd.Flags().BoolVar(&trace, "trace", false, "for each fixture that differs, find the first op whose output differs from the CPU twins' (a merged fixture's base, without adapters)")
	adapters.register(cmd)
	return cmd
}

// checkFixture computes fixture n's golden workload on bes: a catalogue model, or a merged
// fixture's base with its adapter merged first (then the returned file is the base's).
func checkFixture(n string, bes []device.Backend, layers []int, o fixtures.GoldenOptions, cmd *cobra.Command) ([]byte, fixtures.Golden, error) {
	gc, err := fixtures.ParseGoldenName(n) // a golden with 16-bit K/V caches: fixture@k,v
	if err != nil {
		return nil, fixtures.Golden{}, err
	}
	n, o = gc.Fixture, gc.Options(o)
	base := n
	if strings.Contains(n, "+") {
		m, err := fixtures.LookupMerged(n)
		if err != nil {
			return nil, fixtures.Golden{}, err
		}
		u, err := m.Use()
		if err != nil {
			return nil, fixtures.Golden{}, err
		}
		o.Adapters = append([]lora.Use{u}, o.Adapters...)
		base = m.Base
	}
	s, err := fixtures.Lookup(base)
	if err != nil {
		return nil, fixtures.Golden{}, err
	}
	path, err := generateFixture(s, "", cmd)
	if err != nil {
		return nil, fixtures.Golden{}, err
	}
	file, err := os.ReadFile(path)
	if err != nil {
		return nil, fixtures.Golden{}, err
	}
	g, err := fixtures.ComputeGoldenSplit(file, bes, layers, o)
	return file, g, err
}

func sortedKeys(m map[string]fixtures.Golden) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkRow is one fixture's line of verity check: each part of its golden workload "ok" or
// "DIFFERS", or the error that kept it from running.
type checkRow struct {
	Fixture    string  `json:"fixture"`
	Backend    string  `json:"backend"`
	Megakernel bool    `json:"megakernel"`
	Prefill    string  `json:"prefill,omitempty"`
	Verify     string  `json:"verify,omitempty"`
	Greedy     string  `json:"greedy,omitempty"`
	Seconds    float64 `json:"seconds"`
	Error      string  `json:"error,omitempty"`
}

// checkTrace is --trace's finding for a fixture that differs: the first op whose output
// differs from the twins', or why tracing failed (neither: every op's output was the same).
type checkTrace struct {
	Fixture         string `json:"fixture"`
	FirstDifference string `json:"first_difference,omitempty"`
	Error           string `json:"error,omitempty"`
}

// checkRows writes check's rows as a table or as JSON lines, each as soon as it is known.
type checkRows struct {
	w          io.Writer
	json       bool
	backend    string
	megakernel bool
	width      int
}

func (c checkRows) header() {
	if !c.json {
		fmt.Fprintf(c.w, "%-*s  %-7s  %-7s  %-7s  %s\n", c.width, "fixture", "prefill", "verify", "greedy", "seconds")
	}
}

func (c checkRows) row(r checkRow) {
	r.Backend, r.Megakernel = c.backend, c.megakernel
	switch {
	case c.json:
		c.emit(r)
	case r.Error != "":
		fmt.Fprintf(c.w, "%-*s  error: %s\n", c.width, r.Fixture, r.Error)
	default:
		fmt.Fprintf(c.w, "%-*s  %-7s  %-7s  %-7s  %.1f\n", c.width, r.Fixture, r.Prefill, r.Verify, r.Greedy, r.Seconds)
	}
}

func (c checkRows) emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(c.w, "%s\n", b)
}
