package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
)

// defaultBenchModel is the fixture `verity bench` measures when no model is given.
const defaultBenchModel = "small-llama-q4_k_m"

func newBenchCmd() *cobra.Command {
	var models []string
	var asJSON bool
	var format string
	var threads int
	var backend string
	var layers []int
	var megakernel bool
	var sms int
	var o bench.Options
	cmd := &cobra.Command{
		Use:   "bench [--model FILE|FIXTURE ...]",
		Short: "Measure prefill, decode and draft-tree verify throughput against memory bandwidth",
		Long: `Measure prefill, decode and 8-node tree verification, with the bytes each decoded
token moves and the fraction of the measured memory bandwidth that decoding reaches: host
memory copies for the CPU backends, device-to-device copies on a GPU (--backend cuda). Without
--model, the ` + defaultBenchModel + ` fixture is generated (once, cached) and measured. --model
takes a GGUF path or a fixture name (see verity fixture).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(models) == 0 {
				models = []string{defaultBenchModel}
			}
			if asJSON {
				format = "json"
			}
			switch format {
			case "table", "md", "csv", "json", "jsonl":
			default:
				return fmt.Errorf("--format %q: want table, md, csv, json or jsonl", format)
			}
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			be := bes[0] // the bandwidth of the first stage's memory
			probe, probeWhat, err := probeBandwidth(be, threads)
			if err != nil {
				return fmt.Errorf("bandwidth probe: %w", err)
			}
			var rows []bench.Result
			for _, m := range models {
				path, name, err := resolveModel(m, cmd)
				if err != nil {
					return err
				}
				ctx := o.Prompt + o.Decode + 64
				if ctx < 256 {
					ctx = 256
				}
				mdl, err := engine.LoadSplit(path, bes, layers, engine.LoadOptions{MaxRows: 64, Context: ctx, Megakernel: megakernel, MegakernelSMs: sms})
				if err != nil {
					return err
				}
				r, err := bench.Run(mdl.Engine, name, probe, o)
				if c, ok := be.(*cpu.Backend); ok {
					r.Threads = c.Workers()
				}
				r.Host.Command = strings.Join(os.Args, " ")
				mdl.Close()
				if err != nil {
					return err
				}
				rows = append(rows, r)
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
			case "md":
				fmt.Fprintln(w, "| model | backend | weights MB | prefill tok/s | decode tok/s | verify ms/tree | MB/tok | GB/s | of probe |")
				fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|")
				for _, r := range rows {
					fmt.Fprintf(w, "| %s | %s | %.1f | %.1f ± %.1f | %.2f ± %.2f | %.2f ± %.2f | %.1f | %.2f | %.0f%% |\n", r.Model, r.Backend, r.WeightMB,
						r.PrefillTPS, r.PrefillSD, r.DecodeTPS, r.DecodeTPSSD, r.VerifyMS, r.VerifySD, r.BytesPerToken/1e6, r.DecodeGBs, 100*r.Fraction)
				}
				_, err = fmt.Fprintf(w, "\n%d repetitions (mean ± sd); memory bandwidth probe %.2f GB/s (%s)\n", o.Repetitions, probe/1e9, probeWhat)
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "model\tbackend\tweights MB\tprefill tok/s\tdecode tok/s\tms/tok (sd)\tverify ms/tree\tnodes/s\tMB/tok\tGB/s\tof probe\t")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f ± %.1f\t%.2f ± %.2f\t%.1f (%.1f)\t%.1f ± %.1f\t%.1f\t%.1f\t%.2f\t%.0f%%\t\n", r.Model, r.Backend, r.WeightMB,
					r.PrefillTPS, r.PrefillSD, r.DecodeTPS, r.DecodeTPSSD, r.DecodeMS, r.DecodeSD, r.VerifyMS, r.VerifySD, r.VerifyTPS,
					r.BytesPerToken/1e6, r.DecodeGBs, 100*r.Fraction)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if len(r.Curve) == 0 {
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "\nverify cost curve, %s (median of %d):\n", r.Model, o.Trees)
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "nodes\tms/step\tms/node\t")
				for _, p := range r.Curve {
					fmt.Fprintf(tw, "%d\t%.2f\t%.3f\t\n", p.Nodes, p.MS, p.MSPerNode)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d repetitions (mean ± sd); memory bandwidth probe: %.2f GB/s (%s); MB/tok and GB/s from the Program's cost model\n", o.Repetitions, probe/1e9, probeWhat)
			return err
		},
	}
	cmd.Flags().StringSliceVar(&models, "model", nil, "GGUF file or fixture name (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (--format json)")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, md, csv, json or jsonl (json and jsonl hold every sample and the provenance)")
	cmd.Flags().IntVarP(&o.Repetitions, "repetitions", "r", 3, "measure prefill, decode and verify this many times (mean ± sd)")
	cmd.Flags().BoolVar(&o.NoWarmup, "no-warmup", false, "skip the untimed warm-up pass")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	cmd.Flags().IntVar(&o.Prompt, "prompt", 128, "prefill tokens")
	cmd.Flags().IntVar(&o.Decode, "decode", 32, "decoded tokens")
	cmd.Flags().IntVar(&o.Trees, "trees", 8, "tree verifications")
	cmd.Flags().IntVar(&o.TreeNodes, "tree-nodes", 8, "nodes per tree")
	cmd.Flags().IntSliceVar(&o.Widths, "widths", nil, "also measure the verify cost curve at these tree sizes (e.g. 1,2,4,8,16,32,64)")
	return cmd
}

// resolveModel maps a fixture name or a path to a file and a display name.
func resolveModel(m string, cmd *cobra.Command) (string, string, error) {
	if !strings.HasSuffix(m, ".gguf") && !strings.ContainsRune(m, filepath.Separator) {
		s, err := fixtures.Lookup(m)
		if err != nil {
			return "", "", err
		}
		path, err := generateFixture(s, "", cmd)
		return path, m, err
	}
	return m, filepath.Base(m), nil
}

// writeCSV writes one row per result with its provenance.
func writeCSV(w io.Writer, rows []bench.Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"model", "arch", "backend", "threads", "weight_mb", "prompt_tokens", "decoded_tokens", "repetitions",
		"prefill_tok_s", "prefill_tok_s_stddev", "decode_tok_s", "decode_tok_s_stddev", "decode_ms_per_tok", "decode_ms_stddev",
		"verify_ms_per_tree", "verify_ms_stddev", "tree_nodes", "bytes_per_token", "decode_gb_s", "probe_gb_s", "bandwidth_fraction",
		"verity", "go", "os", "cpu", "device", "twin", "time"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, r := range rows {
		cw.Write([]string{r.Model, r.Arch, r.Backend, strconv.Itoa(r.Threads), f(r.WeightMB), strconv.Itoa(r.Prompt), strconv.Itoa(r.Decoded),
			strconv.Itoa(r.Repetitions), f(r.PrefillTPS), f(r.PrefillSD), f(r.DecodeTPS), f(r.DecodeTPSSD), f(r.DecodeMS), f(r.DecodeSD),
			f(r.VerifyMS), f(r.VerifySD), strconv.Itoa(r.TreeNodes), f(r.BytesPerToken), f(r.DecodeGBs), f(r.ProbeGBs), f(r.Fraction),
			r.Host.Verity, r.Host.Go, r.Host.OS, r.Host.CPU, r.Host.Device, r.Host.Twin, r.Host.Time})
	}
	cw.Flush()
	return cw.Error()
}
