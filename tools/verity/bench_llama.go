package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"verity/bench"
	"verity/device"
	"verity/host/gguf"
)

// benchFlagNames maps llama-bench's long flag names to verity bench's, so that either spelling
// is one flag (--n-prompt is --prompt).
func benchFlagNames(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "n-prompt":
		name = "prompt"
	case "n-gen":
		name = "decode"
	case "n-depth":
		name = "depth"
	case "output":
		name = "format"
	}
	return pflag.NormalizedName(name)
}

// benchRun is one measurement of a model: a repetition prefills depth tokens untimed, then
// prompt tokens, decodes decode tokens and verifies trees; pg adds its pg test to the rows.
type benchRun struct {
	depth, prompt, decode int
	pg                    bool
}

// benchRuns lists the runs of a sweep: every depth with every prompt and decode length, and
// each -pg pair at every depth (marking the run of the grid that is the same, if any).
func benchRuns(depths, prompts, decodes []int, pgs []string) ([]benchRun, error) {
	type pair struct{ p, n int }
	var pairs []pair
	for _, s := range pgs {
		a, b, ok := strings.Cut(s, ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(a))
		n, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || p < 1 || n < 1 {
			return nil, fmt.Errorf("--pg %s: want PROMPT,GEN (llama-bench's -pg 512,128), both positive", s)
		}
		pairs = append(pairs, pair{p, n})
	}
	var runs []benchRun
	for _, d := range depths {
		for _, p := range prompts {
			for _, n := range decodes {
				runs = append(runs, benchRun{depth: d, prompt: p, decode: n})
			}
		}
		for _, pr := range pairs {
			found := false
			for i := range runs {
				if r := &runs[i]; r.depth == d && r.prompt == pr.p && r.decode == pr.n {
					r.pg, found = true, true
				}
			}
			if !found {
				runs = append(runs, benchRun{depth: d, prompt: pr.p, decode: pr.n, pg: true})
			}
		}
	}
	return runs, nil
}

// testOptions describes what a model's rows say beyond their measurements: the model as
// llama-bench describes it and the backends it ran on.
func testOptions(path string, bes []device.Backend) (bench.TestOptions, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return bench.TestOptions{}, err
	}
	defer f.Close()
	o := bench.TestOptions{Model: bench.DescribeModel(path, f)}
	for _, b := range bes {
		o.Backends = append(o.Backends, b.Name())
	}
	return o, nil
}

// writeTestTable writes the default table: one line per test, under 120 columns (-o md and
// json have every field).
func writeTestTable(w io.Writer, tests []bench.Test) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbackend\tthreads\ttest\tt/s\tMB/tok\tGB/s\tfloor %\t")
	for _, t := range tests {
		backend := t.Backend
		if i := strings.Index(backend, " ("); i > 0 {
			backend = backend[:i] // the threads have their own column
		}
		if t.Megakernel {
			backend += " mk"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f ± %.1f\t%.2f\t%.2f\t%.0f\t\n", t.Model, backend, t.NThreads, t.Name(),
			t.AvgTS, t.StddevTS, t.BytesPerToken/1e6, t.GBs, t.FloorPct)
	}
	return tw.Flush()
}

// addLlamaBenchFlags registers llama-bench's flags that verity bench has beside its own: -d,
// -pg and --progress (-m, -p, -n, -r, -t and -o are the short forms of --model, --prompt,
// --decode, --repetitions, --threads and --format).
func addLlamaBenchFlags(cmd *cobra.Command, depths *[]int, pgs *[]string, progress *bool) {
	cmd.Flags().IntSliceVarP(depths, "depth", "d", []int{0}, "tokens of context before each run's prompt, prefilled untimed (llama-bench's -d); a list sweeps")
	cmd.Flags().StringArrayVar(pgs, "pg", nil, "PROMPT,GEN: also a pg test, the prompt then GEN tokens decoded, timed together (llama-bench's -pg; repeatable)")
	cmd.Flags().BoolVar(progress, "progress", false, "print a line to stderr as each run starts and ends (llama-bench's --progress)")
	cmd.Flags().SetNormalizeFunc(benchFlagNames)
}
