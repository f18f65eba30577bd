package main

import (
	"bufio"
	"errors"
	"fmt"
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
	var typeName, outputType, embdType string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf [TYPE] (or --type TYPE)",
		Short: "Re-quantise a GGUF file's weights as llama.cpp's quantize does",
		Long: `Re-quantise IN's weights for a llama.cpp file type (` + strings.Join(quantize.FileTypeNames(), " ") + `;
Q3_K, Q4_K and Q5_K mean the _M mixes) with the reference quantisers: each tensor gets the type
llama.cpp's quantize chooses for it — a K-quant mix gives attn_v and ffn_down more bits in some
layers, the output projection Q6_K, and so on — and OUT is byte-identical to llama.cpp's
output without an importance matrix. --pure gives every weight the file type's own type.
1-D tensors, norms, routers and the other tensors llama.cpp never quantises keep their type;
rows that are not whole blocks of a type fall back as llama.cpp's do (q4_K → q5_0, …).
IN may be a fixture name. OUT appears only once it is complete.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 3 {
				if typeName != "" {
					return errors.New("give the type once: as the third argument or as --type")
				}
				typeName = args[2]
			}
			if typeName == "" {
				return errors.New("no file type: give one as the third argument or --type (e.g. Q4_K_M)")
			}
			ft, err := quantize.ParseFileType(typeName)
			if err != nil {
				return fmt.Errorf("--type: %w", err)
			}
			o.FileType = ft
			for _, t := range []struct {
				flag, name string
				dst        **dtype.Type
			}{{"--output-tensor-type", outputType, &o.OutputType}, {"--token-embedding-type", embdType, &o.TokenEmbeddingType}} {
				if t.name == "" {
					continue
				}
				tt, err := tensorType(t.name)
				if err != nil {
					return fmt.Errorf("%s: %w", t.flag, err)
				}
				*t.dst = &tt
			}
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
			counts := map[dtype.Type]int{}
			n := 0
			for _, a := range plan {
				if a.To != a.From {
					n++
				}
				if quantize.Quantizable(a.Name, len(a.Dims)) || a.To != a.From {
					counts[a.To]++
				}
			}
			var mix []string
			for _, t := range dtype.All() {
				if counts[t] > 0 {
					mix = append(mix, fmt.Sprintf("%d %s", counts[t], t))
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %d of %d tensors converted; weights: %s\n", args[1], ft, n, len(plan), strings.Join(mix, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&typeName, "type", "", "llama.cpp file type (e.g. Q4_K_M, Q8_0, F16)")
	cmd.Flags().BoolVar(&o.Pure, "pure", false, "every weight the file type's own type: no mix (llama-quantize --pure)")
	cmd.Flags().StringVar(&outputType, "output-tensor-type", "", "the output projection's type (a ggml type, e.g. q8_0)")
	cmd.Flags().StringVar(&embdType, "token-embedding-type", "", "the token embedding's type (a ggml type)")
	cmd.Flags().BoolVar(&o.LeaveOutput, "leave-output-tensor", false, "keep output.weight as it is")
	cmd.Flags().BoolVar(&o.AllowRequantize, "allow-requantize", false, "accept already-quantised inputs")
	cmd.Flags().IntVar(&o.Workers, "threads", 0, "worker threads (0: all cores)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	return cmd
}

// tensorType parses a ggml type name Verity can write, in any case.
func tensorType(name string) (dtype.Type, error) {
	var names []string
	for _, t := range dtype.All() {
		if _, err := quant.Lookup(t); err == nil {
			names = append(names, t.String())
		}
	}
	t, err := dtype.Parse(name)
	if err == nil {
		if _, err := quant.Lookup(t); err == nil {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%q: want one of %s", name, strings.Join(names, " "))
}
