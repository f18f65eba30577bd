package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/host/gguf"
)

// readLogits reads a float32 little-endian logits file.
func readLogits(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of float32 values", path, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

func newDriftCmd() *cobra.Command {
	var vocab int
	var model string
	var asJSON bool
	var maxULP int64
	cmd := &cobra.Command{
		Use:   "drift BASE.f32 NEW.f32 (--vocab N | --model FILE)",
		Short: "Measure how far two logits files are apart: bits, ulps, KL divergence, top-1 agreement",
		Long: `Compare two logits files (float32 little-endian [rows][vocab], as verity logits and the
llama.cpp oracle write them): rows with identical bits, the first value that differs, the
distance in ulps (largest, and a histogram), the largest absolute difference, NMSE, top-1
agreement, and the KL divergence of NEW's softmax from BASE's per row (float64: mean, p99,
max) with the largest change of BASE's top-token probability. The vocabulary size comes from
--vocab or the model's GGUF file. With --max-ulp N the exit status is 1 when any value is
more than N ulps away (or differs where either side is a NaN or infinity): --max-ulp 0 asserts identical bits.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if vocab == 0 && model != "" {
				path, _, err := resolveModel(model, cmd)
				if err != nil {
					return err
				}
				f, err := gguf.Open(path)
				if err != nil {
					return err
				}
				toks, err := f.Strings("tokenizer.ggml.tokens")
				f.Close()
				if err != nil {
					return fmt.Errorf("--model: no vocabulary size: %w", err)
				}
				vocab = len(toks)
			}
			if vocab <= 0 {
				return errors.New("give the vocabulary size: --vocab N or --model FILE")
			}
			a, err := readLogits(args[0])
			if err != nil {
				return err
			}
			b, err := readLogits(args[1])
			if err != nil {
				return err
			}
			d, err := bench.CompareLogits(a, b, vocab)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				if err := enc.Encode(d); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%d rows × %d: %d identical rows, %d values differ", d.Rows, d.Vocab, d.Identical, d.Differing)
				if d.FirstRow >= 0 {
					fmt.Fprintf(out, " (first: row %d, index %d)", d.FirstRow, d.FirstCol)
				}
				fmt.Fprintln(out)
				var hist []string
				for i, n := range d.ULPHist {
					if n > 0 {
						hist = append(hist, fmt.Sprintf("%s: %d", bench.ULPBucketNames[i], n))
					}
				}
				fmt.Fprintf(out, "ulps: max %d; %s\n", d.MaxULP, strings.Join(hist, ", "))
				fmt.Fprintf(out, "max |Δ| %.3g, NMSE %.3g, top-1 agreement %d/%d\n", d.MaxAbs, d.NMSE, d.Top1, d.Rows)
				fmt.Fprintf(out, "KL divergence (nats): mean %.3g, p99 %.3g, max %.3g; max |Δp| of the top token %.3g\n", d.KLDMean, d.KLDP99, d.KLDMax, d.DeltaPMax)
			}
			if maxULP >= 0 && (d.MaxULP > uint64(maxULP) || d.ULPHist[len(d.ULPHist)-1] > 0) {
				cmd.SilenceUsage = true
				return fmt.Errorf("values differ by more than %d ulps (max %d; %d differing pairs with a NaN or infinity)", maxULP, d.MaxULP, d.ULPHist[len(d.ULPHist)-1])
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&vocab, "vocab", 0, "logits per row")
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name to take the vocabulary size from")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the measures as JSON")
	cmd.Flags().Int64Var(&maxULP, "max-ulp", -1, "fail when a value is more than this many ulps away (−1: never)")
	return cmd
}
