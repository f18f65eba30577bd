package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"verity/device"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/machine"
	"verity/host/plan"
)

// contextHelp describes --context in every command that loads a model.
const contextHelp = "positions per session (0: the plan's — the K/V cache in a quarter of the memory the weights leave, at most the model's trained context)"

func newPlanCmd() *cobra.Command {
	var model, backend string
	var layers []int
	var asJSON, noPredict bool
	var threads, ctx, sessions, rows int
	var share float64
	var w plan.Workload
	var cache cacheFlags
	var adapters loraFlags
	cmd := &cobra.Command{
		Use:   "plan --model FILE|FIXTURE [--json]",
		Short: "How a model runs on this machine: context, memory, placement, predicted speed",
		Long: `Plan a model on this machine from what it measured (verity info): the context every command
uses with --context 0 — the longest whose K/V cache fits a quarter of the host memory the
weights and buffers leave (nine tenths of a GPU's), at most the model's trained context —, the
memory the load takes and where the weights live (mapped from a packed file beside the model,
streamed from the disk when they exceed three quarters of the memory left, with the layers kept
resident and those read each step), the layers' placement across several backends, and the
decode, prefill and verify rates to expect on verity bench's workload (--prompt, --decode,
--tree-nodes), with the reasons in words. The CPU twin's rates come from its kernels timed on
this machine (once, cached); a GPU's are modelled from its measured bandwidth. A context or a
number of sessions that does not fit is refused with the numbers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, name, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			kt, vt, err := cache.types(bes)
			if err != nil {
				return err
			}
			uses, lo, done, err := adapters.open(cmd)
			if err != nil {
				return err
			}
			defer done()
			m, err := machine.Load()
			if err != nil {
				return err
			}
			for _, b := range bes {
				if g, isGPU, err := machine.MeasureGPU(b); isGPU && err == nil {
					m.SetGPU(g)
				}
			}
			pl, err := plan.Make(f, strings.TrimSuffix(name, ".gguf"), m, plan.Options{
				Load:     engine.LoadOptions{Context: ctx, Sessions: sessions, MaxRows: rows, CacheK: kt, CacheV: vt, Adapters: uses, LoRA: lo},
				Backends: bes, FirstLayers: layers, KVShare: share})
			if err != nil {
				return err
			}
			if !noPredict {
				if err := pl.Predict(m, threads, w); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, err := json.MarshalIndent(pl, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			return printPlan(out, pl, m.Snapshot())
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&noPredict, "no-predict", false, "skip the predicted rates (and the kernel timings they need on first use)")
	cmd.Flags().IntVar(&ctx, "context", 0, contextHelp)
	cmd.Flags().IntVar(&sessions, "sessions", 1, "sessions the cache holds at full length")
	cmd.Flags().IntVar(&rows, "step", 64, "rows per step: prefill chunk, and the largest draft tree + 1")
	cmd.Flags().Float64Var(&share, "kv-share", 0, "the share of the memory the weights leave that the default context's K/V cache may take (0: 0.25 on the host, 0.9 on a GPU)")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().IntVar(&w.Prompt, "prompt", 128, "the predicted workload: prefill tokens")
	cmd.Flags().IntVar(&w.Decode, "decode", 32, "the predicted workload: decoded tokens after the prompt")
	cmd.Flags().IntVar(&w.TreeNodes, "tree-nodes", 8, "the predicted workload: nodes of a verified tree")
	cache.add(cmd)
	adapters.register(cmd)
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func printPlan(w io.Writer, pl *plan.Plan, m machine.Facts) error {
	var b strings.Builder
	hb := machine.HumanBytes
	fmt.Fprintf(&b, "model       %s (%s, %d layers, trained for %d positions", pl.Model, pl.Arch, pl.Layers, pl.TrainedContext)
	if pl.RopeContext > 0 {
		fmt.Fprintf(&b, ", RoPE computed up to %d", pl.RopeContext)
	}
	fmt.Fprintf(&b, ")\nmachine     %s, %d threads, budget %s", m.CPU.Model, m.CPU.GoMaxProcs, hb(pl.Budget))
	if cg := m.Memory.Cgroup; cg != nil {
		fmt.Fprintf(&b, " (cgroup v%d limit %s)", cg.Version, hb(cg.LimitBytes))
	}
	fmt.Fprintf(&b, "\ncontext     %d positions × %d session(s) (%s)\n", pl.Context, pl.Sessions, pl.ContextFrom)
	fmt.Fprintf(&b, "K/V cache   %s (%s a position)\n", hb(pl.KVBytes), hb(pl.KVPerPosition))
	fmt.Fprintf(&b, "weights     %s: %s mapped, private memory %s in all", hb(pl.Weights.Bytes), hb(pl.Weights.Mapped), hb(pl.Weights.Private))
	if pl.Weights.Streaming {
		fmt.Fprintf(&b, "; streaming %s a step (%d segments resident, %d streamed)", hb(pl.Weights.StreamedBytes), len(pl.Weights.Resident), len(pl.Weights.Streamed))
	}
	b.WriteString("\n")
	for _, st := range pl.Stages {
		fmt.Fprintf(&b, "stage       layers %d–%d on %s: %s of %s\n", st.Layers[0], st.Layers[1]-1, st.Backend, hb(st.Need), hb(st.Memory))
	}
	if pr := pl.Predicted; pr != nil {
		label := "predicted"
		if pr.Modelled {
			label = "modelled"
		}
		fmt.Fprintf(&b, "%-11s decode %.1f tok/s, prefill %.1f tok/s, %d-node verify %.0f µs (%s-bound; %d-token prompt, %d decoded)\n",
			label, pr.DecodeTPS, pr.PrefillTPS, pr.Workload.TreeNodes, pr.VerifyUS, pr.Bound, pr.Workload.Prompt, pr.Workload.Decode)
		for _, h := range pr.How {
			fmt.Fprintf(&b, "            · %s\n", h)
		}
	}
	b.WriteString("why\n")
	for _, r := range pl.Rationale {
		fmt.Fprintf(&b, "            · %s\n", r)
	}
	for _, x := range pl.Warnings {
		fmt.Fprintf(&b, "warning     %s\n", x)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// planLoad is what every command that loads a model does before it loads: the plan's context
// when o.Context is 0 (and the warnings of a requested one), refusing a load that does not fit
// with the numbers. It returns o with the context, and the plan.
func planLoad(cmd *cobra.Command, f *gguf.File, name string, bes []device.Backend, layers []int, o engine.LoadOptions) (engine.LoadOptions, *plan.Plan, error) {
	m, err := machine.Load()
	if err != nil {
		return o, nil, err
	}
	pl, err := plan.Make(f, name, m, plan.Options{Load: o, Backends: bes, FirstLayers: layers})
	if err != nil {
		return o, nil, err
	}
	for _, w := range pl.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "verity: warning: %s\n", w)
	}
	o.Context = pl.Context
	return o, pl, nil
}

// openModel opens the model at path for a command: the plan's context when o.Context is 0
// (planLoad), a progress bar while a packed-weights file is first written, then the load. The
// model owns the file.
func openModel(cmd *cobra.Command, path, name string, bes []device.Backend, layers []int, o engine.LoadOptions) (*engine.Model, *plan.Plan, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	o, pl, err := planLoad(cmd, f, strings.TrimSuffix(name, ".gguf"), bes, layers, o)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	m, err := loadPlanned(cmd, f, bes, layers, o)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, pl, nil
}

// loadPlanned loads f with o, showing a progress bar while a packed-weights file of more than
// 64 MB is written.
func loadPlanned(cmd *cobra.Command, f *gguf.File, bes []device.Backend, layers []int, o engine.LoadOptions) (*engine.Model, error) {
	update, finish := byteProgress(cmd.ErrOrStderr(), -1, "writing the packed weights")
	o.PackProgress = func(done, total int64) {
		if total > 64<<20 {
			update(done, total)
		}
	}
	m, err := engine.FromFileSplit(f, bes, layers, o)
	finish()
	return m, err
}
