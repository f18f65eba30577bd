package main

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"verity/device/dtype"
	"verity/host/atomicfile"
	"verity/host/gguf"
	"verity/host/quant"
	"verity/host/quantize"
)

func newQuantizeCmd() *cobra.Command {
	var o quantize.Options
	var typeName string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf --type TYPE",
		Short: "Re-quantise a GGUF file's weights with the reference quantisers",
		Long: `Re-quantise every 2-D weight of IN (and 3-D expert stacks) to TYPE with the reference
quantisers, byte-identical to llama.cpp's quantize --pure without an importance matrix.
1-D tensors, norms, routers and the other tensors llama.cpp never quantises keep their type.
Types: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := quantizeType(typeName)
			if err != nil {
				return err
			}
			o.Type = t
			inPath, _, err := resolveModel(args[0], cmd)
			if err != nil {
				return err
			}
			in, err := gguf.Open(inPath)
			if err != nil {
				return err
			}
			defer in.Close()
			o.Warn = func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), "warning:", msg) }
			finish := func() {}
			if !quiet {
				o.Progress, finish = byteProgress(cmd.ErrOrStderr(), -1, "quantising")
			}
			out, err := atomicfile.Create(args[1], 0o644)
			if err != nil {
				return err
			}
			defer out.Abort()
			bw := bufio.NewWriterSize(out, 1<<20)
			plan, err := quantize.Write(in, bw, o)
			if err == nil {
				err = bw.Flush()
			}
			if err == nil {
				err = out.Commit()
			}
			if err != nil {
				return err
			}
			finish()
			n := 0
			for _, a := range plan {
				if a.To != a.From {
					n++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d of %d tensors converted to %s\n", args[1], n, len(plan), t)
			return nil
		},
	}
	cmd.Flags().StringVar(&typeName, "type", "", "target type (ggml name, e.g. q4_K)")
	cmd.Flags().BoolVar(&o.AllowFallback, "allow-fallback", false, "keep tensors whose rows do not fit the type's blocks (with a warning)")
	cmd.Flags().BoolVar(&o.AllowRequantize, "allow-requantize", false, "accept already-quantised inputs")
	cmd.Flags().IntVar(&o.Workers, "threads", 0, "worker threads (0: all cores)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

// quantizeType parses --type: a ggml type name Verity quantises to, in any case.
func quantizeType(name string) (dtype.Type, error) {
	var names []string
	for _, t := range dtype.All() {
		if _, err := quant.Lookup(t); err != nil {
			continue
		}
		if _, err := quantize.FileType(t); err != nil {
			continue
		}
		names = append(names, t.String())
	}
	t, err := dtype.Parse(name)
	if err == nil && slices.Contains(names, t.String()) {
		return t, nil
	}
	return 0, fmt.Errorf("--type %q: want one of %s", name, strings.Join(names, " "))
}
