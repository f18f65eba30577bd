package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	var threadList, prompts, decodes []int
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
		Long: `Measure prefill, decode and 8-node tree verification, with the bytes each decoded
token moves and the fraction of the measured memory bandwidth that decoding reaches: host
memory copies for the CPU backends, device-to-device copies on a GPU (--backend cuda). Without
--model, the ` + defaultBenchModel + ` fixture is generated (once, cached) and measured. --model
takes a GGUF path or a fixture name (see verity fixture). --threads, --prompt and --decode take
lists (e.g. --prompt 128,512,2048 --threads 1,2): every combination is one row, and decoding
after a long prompt measures decode at that depth. --format sql writes CREATE TABLE and INSERT
statements (pipe them into sqlite3) for a result store that verity compare's rows come from.
--peer llama-bench (or a path to one) measures llama.cpp's llama-bench on the same file,
interleaved with Verity (-r rounds of one run each), and prints both with the ratios.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if proto.name != "" {
				return runProtocol(cmd, proto, backend, threadList[0], megakernel, sms, asJSON || format == "json")
			}
			if len(models) == 0 {
				models = []string{defaultBenchModel}
			}
			if asJSON {
				format = "json"
			}
			switch format {
			case "table", "md", "csv", "json", "jsonl", "sql":
			default:
				return fmt.Errorf("--format %q: want table, md, csv, json, jsonl or sql", format)
			}
			if len(threadList) == 0 {
				threadList = []int{0}
			}
			for _, l := range []struct {
				name string
				v    []int
			}{{"--threads", threadList}, {"--prompt", prompts}, {"--decode", decodes}} {
				if len(l.v) == 0 {
					return fmt.Errorf("%s: no value", l.name)
				}
				for _, x := range l.v {
					if x < 0 || (x == 0 && l.name != "--threads") {
						return fmt.Errorf("%s %d: want a positive count", l.name, x)
					}
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
				return benchPeer(cmd, peer, models, backend, threadList, prompts, decodes, format, o)
			}
			var rows []bench.Result
			var probes []string
			for _, threads := range threadList {
				rs, p, what, err := benchThreads(cmd, models, backend, threads, layers, megakernel, sms, prompts, decodes, o, &adapters, cache)
				if err != nil {
					return err
				}
				rows = append(rows, rs...)
				probes = append(probes, fmt.Sprintf("%.2f GB/s (%s)", p/1e9, what))
			}
			probe := strings.Join(probes, ", ")
			if jsonOut != "" {
				if err := writeJSONFile(jsonOut, rows); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			case "jsonl":
				enc := json.NewEncoder(w)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			case "csv":
				return writeCSV(w, rows)
			case "sql":
				return writeSQL(w, rows)
			case "md":
				fmt.Fprintln(w, "| model | backend | threads | prompt | decode | weights MB | prefill tok/s | decode tok/s | verify ms/tree | MB/tok | GB/s | of probe |")
				fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
				for _, r := range rows {
					fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.1f | %.1f ± %.1f | %.2f ± %.2f | %.2f ± %.2f | %.1f | %.2f | %.0f%% |\n", r.Model, r.Backend, r.Threads, r.Prompt, r.Decoded, r.WeightMB,
						r.PrefillTPS, r.PrefillSD, r.DecodeTPS, r.DecodeTPSSD, r.VerifyMS, r.VerifySD, r.BytesPerToken/1e6, r.DecodeGBs, 100*r.Fraction)
				}
				_, err := fmt.Fprintf(w, "\n%d repetitions (mean ± sd); memory bandwidth probe %s\n", o.Repetitions, probe)
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "model\tbackend\tthreads\tprompt\tdecode\tweights MB\tprefill tok/s\tdecode tok/s\tmedian ms/tok (sd)\tverify ms/tree\tnodes/s\tMB/tok\tGB/s\tof probe\t")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f ± %.1f\t%.2f ± %.2f\t%.1f (%.1f)\t%.1f ± %.1f\t%.1f\t%.1f\t%.2f\t%.0f%%\t\n", r.Model, r.Backend, r.Threads, r.Prompt, r.Decoded, r.WeightMB,
					r.PrefillTPS, r.PrefillSD, r.DecodeTPS, r.DecodeTPSSD, r.DecodeMS, r.DecodeSD, r.VerifyMS, r.VerifySD, r.VerifyTPS,
					r.BytesPerToken/1e6, r.DecodeGBs, 100*r.Fraction)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, r := range rows {
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
			_, err := fmt.Fprintf(out, "tok/s and ms/tree: mean ± sd of %d repetitions' rates; ms/tok: the median of every decoded token's time (sd of those times); memory bandwidth probe: %s; MB/tok and GB/s from the Program's cost model\n", o.Repetitions, probe)
			return err
		},
	}
	cmd.Flags().StringSliceVar(&models, "model", nil, "GGUF file or fixture name (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (--format json)")
	cmd.Flags().StringVar(&jsonOut, "json-out", "", "also write the rows as JSON (--format json's) to this file")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, md, csv, json, jsonl or sql (json and jsonl hold every sample and the provenance)")
	cmd.Flags().IntVarP(&o.Repetitions, "repetitions", "r", 3, "measure prefill, decode and verify this many times (mean ± sd)")
	cmd.Flags().BoolVar(&o.NoWarmup, "no-warmup", false, "skip the untimed warm-up pass")
	cmd.Flags().IntSliceVar(&threadList, "threads", []int{0}, "CPU threads (0: all); a list sweeps")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	adapters.register(cmd)
	proto.register(cmd)
	cache.add(cmd)
	cmd.Flags().IntSliceVar(&prompts, "prompt", []int{128}, "prefill tokens; a list sweeps")
	cmd.Flags().IntSliceVar(&decodes, "decode", []int{32}, "decoded tokens (after the prompt); a list sweeps")
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
	prompts, decodes []int, o bench.Options, adapters *loraFlags, cache cacheFlags) ([]bench.Result, float64, string, error) {
	// Every model is found (or generated) before anything is measured or allocated.
	paths, names := make([]string, len(models)), make([]string, len(models))
	for i, m := range models {
		var err error
		if paths[i], names[i], err = resolveModel(m, cmd); err != nil {
			return nil, 0, "", err
		}
	}
	bes, err := openBackends(backend, threads)
	if err != nil {
		return nil, 0, "", err
	}
	defer closeAll(bes)
	be := bes[0] // the bandwidth of the first stage's memory
	probe, probeWhat, err := probeBandwidth(be, threads)
	if err != nil {
		return nil, 0, "", fmt.Errorf("bandwidth probe: %w", err)
	}
	var rows []bench.Result
	for i := range models {
		path, name := paths[i], names[i]
		ctx := max(256, slices.Max(prompts)+max(slices.Max(decodes), o.Ops)+64)
		sessions := 1
		if len(o.Batch) > 0 {
			sessions = max(1, slices.Max(o.Batch))
		}
		kt, vt, err := cache.types(bes)
		if err != nil {
			return nil, 0, "", err
		}
		uses, lo, done, err := adapters.open(cmd)
		if err != nil {
			return nil, 0, "", err
		}
		mdl, err := engine.LoadSplit(path, bes, layers, engine.LoadOptions{MaxRows: 64, Context: ctx, Sessions: sessions, Megakernel: megakernel, MegakernelSMs: sms, Adapters: uses, LoRA: lo, CacheK: kt, CacheV: vt})
		done()
		if err != nil {
			return nil, 0, "", err
		}
		reportMerge(cmd.ErrOrStderr(), mdl.LoRA)
		name += adapters.names()
		for _, p := range prompts {
			for _, d := range decodes {
				o.Prompt, o.Decode = p, d
				r, err := bench.Run(mdl.Engine, name, probe, o)
				if err != nil {
					mdl.Close()
					return nil, 0, "", err
				}
				if c, ok := be.(*cpu.Backend); ok {
					r.Threads = c.Workers()
				}
				r.Host.Command = strings.Join(os.Args, " ")
				rows = append(rows, r)
			}
		}
		mdl.Close()
	}
	return rows, probe, probeWhat, nil
}

// resolveModel maps a file or a fixture name (verity fixture lists them; generated on first
// use) to a file and a display name. An existing file wins over a fixture of the same name.
func resolveModel(m string, cmd *cobra.Command) (string, string, error) {
	if m == "" {
		return "", "", fmt.Errorf("no model given: --model FILE or a fixture name (verity fixture lists them)")
	}
	if _, err := os.Stat(m); err == nil || strings.HasSuffix(m, ".gguf") || strings.ContainsRune(m, filepath.Separator) {
		return m, filepath.Base(m), nil
	}
	s, err := fixtures.Lookup(m)
	if err != nil {
		return "", "", fmt.Errorf("%s: no such file, and no fixture of that name (verity fixture lists them)", m)
	}
	path, err := generateFixture(s, "", cmd)
	return path, m, err
}

// resultColumns are the flat columns of a result row (csv and sql): name, SQL type, value.
func resultColumns(r bench.Result) [][3]string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	i := strconv.Itoa
	return [][3]string{
		{"model", "TEXT", r.Model}, {"arch", "TEXT", r.Arch}, {"backend", "TEXT", r.Backend}, {"threads", "INTEGER", i(r.Threads)},
		{"weight_mb", "REAL", f(r.WeightMB)}, {"prompt_tokens", "INTEGER", i(r.Prompt)}, {"decoded_tokens", "INTEGER", i(r.Decoded)},
		{"repetitions", "INTEGER", i(r.Repetitions)}, {"prefill_tok_s", "REAL", f(r.PrefillTPS)}, {"prefill_tok_s_stddev", "REAL", f(r.PrefillSD)},
		{"decode_tok_s", "REAL", f(r.DecodeTPS)}, {"decode_tok_s_stddev", "REAL", f(r.DecodeTPSSD)}, {"decode_ms_per_tok", "REAL", f(r.DecodeMS)},
		{"decode_ms_stddev", "REAL", f(r.DecodeSD)}, {"verify_ms_per_tree", "REAL", f(r.VerifyMS)}, {"verify_ms_stddev", "REAL", f(r.VerifySD)},
		{"tree_nodes", "INTEGER", i(r.TreeNodes)}, {"bytes_per_token", "REAL", f(r.BytesPerToken)}, {"decode_gb_s", "REAL", f(r.DecodeGBs)},
		{"probe_gb_s", "REAL", f(r.ProbeGBs)}, {"bandwidth_fraction", "REAL", f(r.Fraction)},
		{"verity", "TEXT", r.Host.Verity}, {"go", "TEXT", r.Host.Go}, {"os", "TEXT", r.Host.OS}, {"cpu", "TEXT", r.Host.CPU},
		{"device", "TEXT", r.Host.Device}, {"twin", "TEXT", r.Host.Twin}, {"time", "TEXT", r.Host.Time},
		{"prefill_tok_s_samples", "TEXT", samples(r.PrefillSamples)}, {"decode_tok_s_samples", "TEXT", samples(r.DecodeSamples)},
		{"verify_ms_samples", "TEXT", samples(r.VerifySamples)}, {"command", "TEXT", r.Host.Command},
	}
}

// samples joins a row's per-repetition values with spaces.
func samples(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return strings.Join(parts, " ")
}

// writeCSV writes one row per result with its provenance.
func writeCSV(w io.Writer, rows []bench.Result) error {
	cw := csv.NewWriter(w)
	var head []string
	for _, c := range resultColumns(bench.Result{}) {
		head = append(head, c[0])
	}
	cw.Write(head)
	for _, r := range rows {
		var rec []string
		for _, c := range resultColumns(r) {
			rec = append(rec, c[2])
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// writeSQL writes a CREATE TABLE (if it does not exist) and one INSERT per result, for sqlite3.
func writeSQL(w io.Writer, rows []bench.Result) error {
	var defs, names []string
	for _, c := range resultColumns(bench.Result{}) {
		defs = append(defs, "  "+c[0]+" "+c[1])
		names = append(names, c[0])
	}
	if _, err := fmt.Fprintf(w, "CREATE TABLE IF NOT EXISTS verity_bench (\n%s\n);\n", strings.Join(defs, ",\n")); err != nil {
		return err
	}
	for _, r := range rows {
		var vals []string
		for _, c := range resultColumns(r) {
			v := c[2]
			if c[1] == "TEXT" {
				v = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			} else if v == "NaN" || strings.HasSuffix(v, "Inf") {
				v = "NULL"
			}
			vals = append(vals, v)
		}
		if _, err := fmt.Fprintf(w, "INSERT INTO verity_bench (%s) VALUES (%s);\n", strings.Join(names, ", "), strings.Join(vals, ", ")); err != nil {
			return err
		}
	}
	return nil
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
