package main

import (
	"fmt"
	"math"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/bench"
)

func newCompareCmd() *cobra.Command {
	var alpha, minChange, failSlower float64
	var plotPath string
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare two benchmark result files: changes, and whether they are more than noise",
		Long: `Compare the tests of two result files written by verity bench -o json or jsonl (or
--json-out, or llama-bench -o json or jsonl) — say, before and after a change, or two machines —
run on the same model, backend, thread count and settings: each test's rate (t/s: tokens per
second; tree nodes per second for tv), the relative change of each mean, and the p-value of
Welch's t-test over the repetitions' samples. A change is called
significant when p < --alpha and it is at least --min-change. With --fail-slower P, the exit
status is 1 if any significant change is a slowdown of more than P percent.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rows [2][]bench.Test
			for i, path := range args {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				rows[i], err = bench.ReadTests(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			cs := bench.Compare(rows[0], rows[1])
			if len(cs) == 0 {
				return fmt.Errorf("no test of %s matches a test of %s (same model, backend, threads, test and cache types)", args[1], args[0])
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "model\tbackend\ttest\tbase\tnew\tchange\tp\tverdict")
			slower := 0
			for _, c := range cs {
				verdict := "same"
				if c.Significant(alpha, minChange) {
					verdict = "better"
					if !c.Better {
						verdict = "worse"
						if failSlower > 0 && math.Abs(c.Change)*100 > failSlower {
							slower++
						}
					}
				}
				p := "n/a"
				if !math.IsNaN(c.P) {
					p = fmt.Sprintf("%.3g", c.P)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f ± %.2f\t%.2f ± %.2f\t%+.1f%%\t%s\t%s\n", c.Model, c.Backend, c.Metric,
					c.Base, c.BaseSD, c.New, c.NewSD, 100*c.Change, p, verdict)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if plotPath != "" {
				if err := comparePlot(plotPath, cs, alpha, minChange); err != nil {
					return err
				}
			}
			if slower > 0 {
				return fmt.Errorf("%d significant slowdowns of more than %g %%", slower, failSlower)
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&alpha, "alpha", 0.05, "significance level of the t-test")
	cmd.Flags().Float64Var(&minChange, "min-change", 0.02, "smallest relative change worth reporting as a change")
	cmd.Flags().StringVar(&plotPath, "plot", "", plotHelp+": base and new bars of each test, with their noise")
	cmd.Flags().Float64Var(&failSlower, "fail-slower", 0, "exit with status 1 on a significant slowdown of more than this many percent (0: never)")
	return cmd
}
