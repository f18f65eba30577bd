package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/fixtures"
)

func newFixtureCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "fixture [NAME]",
		Short: "List or generate the deterministic synthetic models",
		Long: `Without NAME, list the catalogue of synthetic GGUF models. With NAME, generate it (into
the fixture cache, or to --out) and print its path. Generated files are byte-identical on every
machine.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if len(args) == 0 {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "name\tarch\tlayers\tn_embd\tvocab\tfile type\tsize")
				for _, s := range fixtures.Catalog() {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", s.Name, s.Arch, s.NLayer, s.NEmbd, s.NVocab, s.FileType, humanBytes(s.FileBytes()))
				}
				return tw.Flush()
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
