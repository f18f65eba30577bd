package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/fixtures"
)

func newFixtureCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "fixture [NAME | MODEL+ADAPTER]",
		Short: "List or generate the deterministic synthetic models and LoRA adapters",
		Long: `Without NAME, list the catalogue of synthetic GGUF models and of LoRA adapters for them.
With NAME, generate it (into the fixture cache, or to --out) and print its path; MODEL+ADAPTER
generates that adapter for that model (a file for --lora). Generated files are byte-identical on
every machine.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if len(args) == 0 {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "name\tarch\tlayers\tn_embd\tvocab\tfile type\tsize")
				for _, s := range fixtures.Catalog() {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", s.Name, s.Arch, s.NLayer, s.NEmbd, s.NVocab, s.FileType, humanBytes(s.FileBytes()))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(w, "\nLoRA adapters (MODEL+ADAPTER; targets: the kinds of layer matrix, or every matrix):")
				tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "adapter\trank\talpha\ttargets\tembedding\ttype")
				for _, a := range fixtures.Adapters() {
					targets := strings.Join(a.Targets, ",")
					if a.Targets == nil {
						targets = "every matrix"
					} else if len(a.Targets) == 0 {
						targets = "-"
					}
					fmt.Fprintf(tw, "%s\t%d\t%g\t%s\t%t\t%s\n", a.Name, a.Rank, a.Alpha, targets, a.Embedding, a.Type)
				}
				return tw.Flush()
			}
			if model, adapter, ok := strings.Cut(args[0], "+"); ok {
				s, err := fixtures.Lookup(model)
				if err != nil {
					return err
				}
				a, err := fixtures.LookupAdapter(adapter)
				if err != nil {
					return err
				}
				path := out
				if out != "" {
					err = fixtures.WriteAdapter(out, s, a)
				} else {
					path, err = fixtures.AdapterPath(s, a)
				}
				if err != nil {
					return err
				}
				fmt.Fprintln(w, path)
				return nil
			}
			s, err := fixtures.Lookup(args[0])
			if err != nil {
				return err
			}
			path, err := generateFixture(s, out, cmd)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write here instead of the cache")
	return cmd
}

// generateFixture makes the fixture (cached unless out is set), with a progress bar for big ones.
func generateFixture(s fixtures.Spec, out string, cmd *cobra.Command) (string, error) {
	var progress func(done, total int64)
	if s.FileBytes() > 64<<20 {
		var finish func()
		progress, finish = byteProgress(cmd.ErrOrStderr(), s.FileBytes(), "generating "+s.Name)
		defer finish()
	}
	if out != "" {
		return out, fixtures.Generate(s, out, progress)
	}
	return fixtures.SpecPath(s, progress)
}
