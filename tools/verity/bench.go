package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/device/cpu"
	"verity/device/perf"
	"verity/fixtures"
	"verity/host/atomicfile"
	"verity/host/engine"
)

// defaultBenchModel is the fixture `verity bench` measures when no model is given.
const defaultBenchModel = "small-llama-q4_k_m"

func newBenchCmd() *cobra.Command {
	var models []string
	var asJSON bool
	var jsonOut string
	var format string
	var threadList, prompts, decodes, depths []int
	var pgs []string
	var progress bool
	var plotPath string
	var backend string
	var layers []int
	var megakernel bool
	var adapters loraFlags
	var sms int
	var proto protocolFlags
	var peer string
	var o bench.Options
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "bench [--model FILE|FIXTURE ...]",
		Short: "Measure prefill, decode and draft-tree verify throughput against memory bandwidth",
		Long: `Measure prefill, decode and tree verification as llama.cpp's llama-bench measures
prefill and decode, with the bytes each token moves and the fraction of the measured memory
bandwidth that reaches (host memory copies for the CPU backends, device-to-device copies on a
GPU, --backend cuda). Without --model, the ` + defaultBenchModel + ` fixture is generated
(once, cached) and measured; --model takes a GGUF path or a fixture name (see verity fixture).

Each run prefills --depth tokens untimed, then times a prompt of --prompt tokens (the pp test),
--decode tokens decoded one by one after it (tg, at the depth of the prompt's end) and
--trees verifications of a --tree-nodes draft tree after those (Verity's tv test: tree nodes
per second); --pg P,N adds a pg test (the prompt and the decode timed together). --threads,
--prompt, --decode and --depth take lists (--prompt 128,2048 --threads 1,2): every combination
is a run; 0 leaves a test out (-p 0 -n 128: decoding from an empty context, llama-bench's tg128).

llama-bench's flags are the same flags: -m, -p, -n, -pg, -d, -r, -t, -o, -ctk, -ctv, --progress
(and --n-prompt, --n-gen, --n-depth, --output). -o md, csv, json, jsonl and sql write one row per
test in llama-bench's layout with llama-bench's fields (settings Verity does not have hold
llama-bench's defaults) and Verity's own after them — the test, model, backend, megakernel, bytes
per token, GB/s, the probe's GB/s, the percentage of it reached, the build and the command
line — so that llama.cpp's scripts/compare-llama-bench.py and verity compare read them beside
llama-bench's; -o sql | sqlite3 FILE keeps a result store (llama-bench's llama_bench table, and
verity_tests for Verity's columns). The default table is a summary; --json-out FILE also writes
each run's whole record (every sample, the extra measurements below, the provenance).

--peer llama-bench (or a path to one) measures llama.cpp's llama-bench on the same file,
interleaved with Verity (-r rounds of one run each), and prints both with the ratios.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if proto.name != "" {
				return runProtocol(cmd, proto, backend, threadList[0], megakernel, sms, asJSON || format == "json", jsonOut)
			}
			if len(models) == 0 {
				models = []string{defaultBenchModel}
			}
			if asJSON {
				format = "json"
			}
			if format != "table" && !slices.Contains(bench.TestFormats, format) {
				return fmt.Errorf("--format %q: want table, %s", format, strings.Join(bench.TestFormats, ", "))
			}
			if len(threadList) == 0 {
				threadList = []int{0}
			}
			for _, l := range []struct {
				name string
				v    []int
			}{{"--threads", threadList}, {"--prompt", prompts}, {"--decode", decodes}, {"--depth", depths}} {
				if len(l.v) == 0 {
					return fmt.Errorf("%s: no value", l.name)
				}
				for _, x := range l.v {
					if x < 0 {
						return fmt.Errorf("%s %d: want a count of 0 or more", l.name, x)
					}
				}
			}
			runs, err := benchRuns(depths, prompts, decodes, pgs)
			if err != nil {
				return err
			}
			if plotPath != "" {
				if _, err := plotFormat(plotPath); err != nil {
					return err
				}
			}
			for _, c := range []struct {
				name string
				v    int
			}{{"--repetitions", o.Repetitions}, {"--trees", o.Trees}, {"--tree-nodes", o.TreeNodes}} {
				if c.v < 1 {
					return fmt.Errorf("%s %d: want at least 1", c.name, c.v)
				}
			}
			if o.Ops < 0 {
				return fmt.Errorf("--ops %d: want a count of tokens (0: no profile)", o.Ops)
			}
			if peer != "" {
				if len(adapters.specs) > 0 {
					return fmt.Errorf("--peer compares the files as they are: no --lora")
				}
				if slices.Contains(prompts, 0) || slices.Contains(decodes, 0) || slices.Max(depths) > 0 || len(pgs) > 0 {
					return fmt.Errorf("--peer runs llama-bench's pp and tg tests from an empty context: positive --prompt and --decode, no --depth or --pg")
				}
				return benchPeer(cmd, peer, models, backend, threadList, prompts, decodes, format, o)
			}
			var rows []bench.Result
			var tests []bench.Test
			var probes []string
			prog := newJobProgress(cmd.ErrOrStderr(), len(threadList)*len(models)*len(runs), "bench", true, progress)
			defer prog.Finish()
			for _, threads := range threadList {
				rs, ts, p, what, err := benchThreads(cmd, models, backend, threads, layers, megakernel, sms, runs, o, &adapters, cache, prog)
				if err != nil {
					return err
				}
				rows, tests = append(rows, rs...), append(tests, ts...)
				probes = append(probes, fmt.Sprintf("%.2f GB/s (%s)", p/1e9, what))
			}
			prog.Finish()
			probe := strings.Join(probes, ", ")
			if len(probes) > 1 {
				probe = "\n  " + strings.Join(probes, "\n  ")
			}
			if jsonOut != "" {
				if err := writeJSONFile(jsonOut, rows); err != nil {
					return err
				}
			}
			if plotPath != "" {
				if err := sweepPlot(plotPath, rows, tests); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			note := fmt.Sprintf("t/s: mean ± sd of %d repetitions (tv: tree nodes per second); MB/tok and GB/s: the Program's cost model\nfloor %%: GB/s as a percentage of the memory bandwidth probe, %s", o.Repetitions, probe)
			if format != "table" {
				return bench.WriteTests(w, format, tests, note)
			}
			if err := writeTestTable(w, tests); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			said := map[string]bool{} // once per model and thread count, not per run
			for _, r := range rows {
				k := fmt.Sprint(r.Model, r.Threads)
				if said[k] {
					continue
				}
				said[k] = true
				if r.CacheK != "f32" || r.CacheV != "f32" {
					fmt.Fprintf(out, "K/V cache of %s: %s K, %s V, %.1f MB (%.1f MB as f32, %.1f MB saved)\n", r.Model, r.CacheK, r.CacheV,
						r.CacheMB, r.CacheF32MB, r.CacheF32MB-r.CacheMB)
				} else {
					fmt.Fprintf(out, "K/V cache of %s: f32 K and V, %.1f MB\n", r.Model, r.CacheMB)
				}
			}
			for _, r := range rows {
				var curve, ops, batch []string
				for _, p := range r.Curve {
					curve = append(curve, fmt.Sprintf("%d\t%.2f\t%.3f\t", p.Nodes, p.MS, p.MSPerNode))
				}
				for _, p := range r.Ops {
					ops = append(ops, fmt.Sprintf("%s\t%.0f\t%.3f\t%.1f%%\t%.2f\t%.2f\t%.1f\t%.1f\t", p.Name, p.Calls, p.MS, 100*p.Share, p.MB, p.GBs,
						1e3*p.ModelMS, 1e3*p.FloorMS))
				}
				for _, b := range r.Batch {
					batch = append(batch, fmt.Sprintf("%d\t%.1f\t%.1f\t%.2f\t%.2f×\t", b.Sessions, b.TPS, b.PerSess, b.StepMS, b.Scaling))
				}
				for _, t := range []struct {
					title, header string
					lines         []string
				}{
					{fmt.Sprintf("verify cost curve, %s, %d threads, after %d+%d tokens (median of %d)", r.Model, r.Threads, r.Prompt, r.Decoded, o.Trees),
						"nodes\tms/step\tms/node\t", curve},
					{fmt.Sprintf("per-op decode profile, %s, %d threads, %d tokens after %d (each op timed alone: between events on a GPU, else up to a sync; the model columns are the static model's prediction and floor on an %s, modelled: verity kernels)", r.Model, r.Threads, o.Ops, r.Prompt, perf.DefaultCard),
						"op\tcalls/tok\tms/tok\tshare\tMB/tok\tGB/s\t" + perf.DefaultCard + " model µs/tok\tfloor µs/tok\t", ops},
					{fmt.Sprintf("batched decoding, %s, %d threads, %d greedy tokens per session after %d, every session's row in one step", r.Model, r.Threads, r.Decoded, r.Prompt),
						"sessions\ttok/s\ttok/s/session\tms/step\tvs one session\t", batch},
				} {
					if err := section(out, t.title, t.header, t.lines); err != nil {
						return err
					}
				}
			}
			for _, r := range rows {
				if sp := r.Spec; sp != nil {
					fmt.Fprintf(out, "\nspeculative decoding, %s, %d threads, %d greedy tokens after %d, synthetic drafts accepted by depth with %v: %.1f tok/s against %.1f decoding one per step (%.2f×); %d rounds, %.2f of %.2f drafted tokens accepted per round\n",
						r.Model, r.Threads, sp.Tokens, r.Prompt, sp.Rates, sp.TPS, sp.PlainTPS, sp.Speedup, sp.Rounds, sp.MeanAccepted, float64(sp.Drafted)/float64(sp.Rounds))
				}
			}
			_, err = fmt.Fprintln(out, note)
			return err
		},
	}
	cmd.Flags().StringSliceVarP(&models, "model", "m", nil, "GGUF file or fixture name (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (--format json)")
	cmd.Flags().StringVar(&jsonOut, "json-out", "", "also write each run's whole record as JSON to this file (every sample, the extra measurements, the provenance)")
	cmd.Flags().StringVarP(&format, "format", "o", "table", "output: table, or one row per test in llama-bench's md, csv, json, jsonl or sql (--output)")
	cmd.Flags().IntVarP(&o.Repetitions, "repetitions", "r", 3, "measure prefill, decode and verify this many times (mean ± sd)")
	cmd.Flags().BoolVar(&o.NoWarmup, "no-warmup", false, "skip the untimed warm-up pass")
	cmd.Flags().IntSliceVarP(&threadList, "threads", "t", []int{0}, "CPU threads (0: all); a list sweeps")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	adapters.register(cmd)
	proto.register(cmd)
	cache.add(cmd)
	cmd.Flags().IntSliceVarP(&prompts, "prompt", "p", []int{128}, "prefill tokens (0: none); a list sweeps (--n-prompt)")
	cmd.Flags().IntSliceVarP(&decodes, "decode", "n", []int{32}, "decoded tokens after the prompt (0: none); a list sweeps (--n-gen)")
	addLlamaBenchFlags(cmd, &depths, &pgs, &progress)
	cmd.Flags().StringVar(&plotPath, "plot", "", plotHelp+": t/s against what the run swept (prompt, depth, threads, --widths, --batch)")
	cmd.Flags().IntVar(&o.Trees, "trees", 8, "tree verifications")
	cmd.Flags().IntVar(&o.TreeNodes, "tree-nodes", 8, "nodes per tree")
	cmd.Flags().IntVar(&o.Ops, "ops", 0, "also profile decoding this many tokens op by op: time, bytes and GB/s per kind of op")
	cmd.Flags().IntSliceVar(&o.Widths, "widths", nil, "also measure the verify cost curve at these tree sizes (e.g. 1,2,4,8,16,32,64)")
	cmd.Flags().IntSliceVar(&o.Batch, "batch", nil, "also measure decoding --decode tokens in this many sessions at once, one step for all (e.g. 1,4,16)")
	cmd.Flags().StringVar(&peer, "peer", "", "also run llama.cpp's llama-bench (\"llama-bench\": on the PATH or as the peer script built it; or its path) on the same files, interleaved, and print the ratios")
	cmd.Flags().Float64SliceVar(&o.Spec, "spec", nil, "also measure speculative decoding of --decode greedy tokens with synthetic draft chains accepted with these probabilities by depth (e.g. 0.9,0.8,0.7,0.6)")
	return cmd
}

// benchThreads measures every model at every prompt and decode length with one thread count,
// and returns the rows and the memory bandwidth probe it measured them against.
// section writes a titled table (cells ending in tabs, aligned right); nothing without lines.
func section(w io.Writer, title, header string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	return tw.Flush()
}

func benchThreads(cmd *cobra.Command, models []string, backend string, threads int, layers []int, megakernel bool, sms int,
	runs []benchRun, o bench.Options, adapters *loraFlags, cache cacheFlags, prog *jobProgress) ([]bench.Result, []bench.Test, float64, string, error) {
	// Every model is found (or generated) before anything is measured or allocated.
	paths, names := make([]string, len(models)), make([]string, len(models))
	for i, m := range models {
		var err error
		if paths[i], names[i], err = resolveModel(m, cmd); err != nil {
			return nil, nil, 0, "", err
		}
	}
	bes, err := openBackends(backend, threads)
	if err != nil {
		return nil, nil, 0, "", err
	}
	defer closeAll(bes)
	be := bes[0] // the bandwidth of the first stage's memory
	probe, probeWhat, err := probeBandwidth(be, threads)
	if err != nil {
		return nil, nil, 0, "", fmt.Errorf("bandwidth probe: %w", err)
	}
	var rows []bench.Result
	var tests []bench.Test
	for i := range models {
		path, name := paths[i], names[i]
		need := 0
		for _, r := range runs {
			need = max(need, r.depth+r.prompt+max(r.decode, o.Ops))
		}
		ctx := max(256, need+64)
		sessions := 1
		if len(o.Batch) > 0 {
			sessions = max(1, slices.Max(o.Batch))
		}
		kt, vt, err := cache.types(bes)
		if err != nil {
			return nil, nil, 0, "", err
		}
		to, err := testOptions(path, bes)
		if err != nil {
			return nil, nil, 0, "", err
		}
		uses, lo, done, err := adapters.open(cmd)
		if err != nil {
			return nil, nil, 0, "", err
		}
		mdl, err := engine.LoadSplit(path, bes, layers, engine.LoadOptions{MaxRows: 64, Context: ctx, Sessions: sessions, Megakernel: megakernel, MegakernelSMs: sms, Adapters: uses, LoRA: lo, CacheK: kt, CacheV: vt})
		done()
		if err != nil {
			return nil, nil, 0, "", err
		}
		reportMerge(cmd.ErrOrStderr(), mdl.LoRA)
		name += adapters.names()
		for _, run := range runs {
			o.Depth, o.Prompt, o.Decode = run.depth, run.prompt, run.decode
			prog.Start(fmt.Sprintf("%s, %s, depth %d, prompt %d, decode %d", name, backendsName(bes), run.depth, run.prompt, run.decode))
			r, err := bench.Run(mdl.Engine, name, probe, o)
			prog.Done()
			if err != nil {
				mdl.Close()
				return nil, nil, 0, "", err
			}
			if c, ok := be.(*cpu.Backend); ok {
				r.Threads = c.Workers()
			}
			r.Megakernel = megakernel
			r.Host.Command = strings.Join(os.Args, " ")
			rows = append(rows, r)
			to.PG = run.pg
			tests = append(tests, bench.Tests(r, to)...)
		}
		mdl.Close()
	}
	return rows, tests, probe, probeWhat, nil
}

// resolveModel maps a file or a fixture name (verity fixture lists them; generated on first
// use) to a file and a display name. An existing file wins over a fixture of the same name.
func resolveModel(m string, cmd *cobra.Command) (string, string, error) {
	if m == "" {
		return "", "", fmt.Errorf("no model given: --model FILE or a fixture name (verity fixture lists them)")
	}
	_, err := os.Stat(m)
	if err == nil {
		return m, filepath.Base(m), nil
	}
	if strings.HasSuffix(m, ".gguf") || strings.ContainsRune(m, filepath.Separator) {
		// a file that is not there fails here, before anything (bench's bandwidth probe) is
		// allocated for it
		return "", "", fmt.Errorf("%s: %w", m, errors.Unwrap(err))
	}
	s, err := fixtures.Lookup(m)
	if err != nil {
		return "", "", fmt.Errorf("%s: no such file, and no fixture of that name (verity fixture lists them)", m)
	}
	path, err := generateFixture(s, "", cmd)
	return path, m, err
}

// benchPeer measures each model against llama-bench, interleaved, at every thread count and
// prompt and decode length, and prints one table per combination.
func benchPeer(cmd *cobra.Command, peer string, models []string, backend string, threadList, prompts, decodes []int, format string, o bench.Options) error {
	lb, err := bench.FindLlamaBench(peer)
	if err != nil {
		return err
	}
	var all []bench.PeerComparison
	for _, threads := range threadList {
		bes, err := openBackends(backend, threads)
		if err != nil {
			return err
		}
		workers := threads
		if c, ok := bes[0].(*cpu.Backend); ok {
			workers = c.Workers()
		}
		for _, m := range models {
			path, name, err := resolveModel(m, cmd)
			if err != nil {
				closeAll(bes)
				return err
			}
			ctx := max(256, slices.Max(prompts)+slices.Max(decodes)+64)
			mdl, err := engine.LoadSplit(path, bes, nil, engine.LoadOptions{MaxRows: 64, Context: ctx})
			if err != nil {
				closeAll(bes)
				return err
			}
			for _, p := range prompts {
				for _, d := range decodes {
					o.Prompt, o.Decode = p, d
					c, err := bench.ComparePeer(mdl.Engine, name, path, lb, workers, o.Repetitions, o)
					if err != nil {
						mdl.Close()
						closeAll(bes)
						return err
					}
					all = append(all, c)
				}
			}
			mdl.Close()
		}
		closeAll(bes)
	}
	w := cmd.OutOrStdout()
	if format == "json" || format == "jsonl" {
		enc := json.NewEncoder(w)
		if format == "json" {
			enc.SetIndent("", "  ")
			return enc.Encode(all)
		}
		for _, c := range all {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range all {
		fmt.Fprintf(w, "\n%s, %d threads: Verity against llama.cpp %s, %d interleaved rounds, median [min … max]\n", c.Model, c.Threads, c.Build, c.Rounds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tunit\tllama.cpp\tVerity\tVerity speed / llama.cpp\t")
		for _, r := range c.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%.1f [%.1f … %.1f]\t%.1f [%.1f … %.1f]\t%.2f× [%.2f … %.2f]\t\n", r.Workload, r.Unit,
				r.Peer.Median, r.Peer.Min, r.Peer.Max, r.Verity.Median, r.Verity.Min, r.Verity.Max, r.Ratio.Median, r.Ratio.Min, r.Ratio.Max)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "llama.cpp: %s (its tests from an empty context; Verity decodes and verifies after the prompt)\n", c.Command)
	}
	return nil
}

// writeJSONFile writes the rows as indented JSON to path, whole or not at all.
func writeJSONFile(path string, rows []bench.Result) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rows); err != nil {
		return err
	}
	return f.Commit()
}
