package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"verity/device"
	"verity/device/kernels"
	"verity/host/atomicfile"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/tokenizer"
)

func newLogitsCmd() *cobra.Command {
	var modelPath, tokens, prompt, tree, out string
	var parseSpecial bool
	var threads, ctx int
	var backend string
	var layers []int
	var megakernel bool
	var adapters loraFlags
	var sms int
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "logits --model FILE (--tokens 1,2,3 | --prompt TEXT) --out LOGITS",
		Short: "Write the logits of every position (or of every draft-tree node)",
		Long: `Run the model over --tokens and write the logits of every position as float32
little-endian [n_tokens][n_vocab] (llama.cpp oracle format). --prompt gives the tokens as
text, tokenized by the model's tokenizer with BOS/EOS as the model asks (see verity tokenize;
special tokens in the text are recognised with --parse-special). With --verify-tree
'tok:parent,tok:parent,...' the tokens are the committed prefix and the tree's nodes follow it:
node 0 is the root (parent -1) continuing the prefix, every other parent index is smaller than
its node's; the output then has one row per node, each bit-identical to decoding the path to
that node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			modelPath, _, err := resolveModel(modelPath, cmd)
			if err != nil {
				return err
			}
			toks, err := parseInts(tokens)
			if err != nil {
				return fmt.Errorf("--tokens: %w", err)
			}
			if cmd.Flags().Changed("prompt") {
				if tokens != "" {
					return fmt.Errorf("give --tokens or --prompt, not both")
				}
				tk, err := loadTokenizer(modelPath)
				if err != nil {
					return err
				}
				toks = tk.Encode(prompt, tokenizer.Options{AddSpecial: true, ParseSpecial: parseSpecial})
			}
			var t *engine.Tree
			if tree != "" {
				if t, err = parseTree(tree); err != nil {
					return fmt.Errorf("--verify-tree: %w", err)
				}
			} else if len(toks) == 0 {
				return fmt.Errorf("--tokens: no tokens given")
			}
			rows := 64
			if t != nil && len(t.Tokens) > rows {
				rows = len(t.Tokens)
			}
			need := len(toks) + rows
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			kt, vt, err := cache.types(bes)
			if err != nil {
				return err
			}
			uses, lo, done, err := adapters.open(cmd)
			if err != nil {
				return err
			}
			defer done()
			if ctx < 0 {
				return fmt.Errorf("--context %d: want 0 (the plan's) or more positions", ctx)
			}
			f, err := gguf.Open(modelPath)
			if err != nil {
				return err
			}
			o, pl, err := planLoad(cmd, f, strings.TrimSuffix(filepath.Base(modelPath), ".gguf"), bes, layers, engine.LoadOptions{MaxRows: rows, Context: ctx, Megakernel: megakernel, MegakernelSMs: sms, Adapters: uses, LoRA: lo, CacheK: kt, CacheV: vt})
			if err != nil {
				f.Close()
				return err
			}
			positions := len(toks)
			if t != nil {
				positions += len(t.Tokens)
			}
			if positions > o.Context {
				f.Close()
				return fmt.Errorf("%d positions (tokens and tree nodes) are more than the context of %d (%s); --context %d computes them", positions, o.Context, pl.ContextFrom, positions)
			}
			o.Context = need // what these logits need, no more
			m, err := loadPlanned(cmd, f, bes, layers, o)
			if err != nil {
				f.Close()
				return err
			}
			reportMerge(cmd.ErrOrStderr(), m.LoRA)
			defer m.Close()
			s := m.NewSession()
			var logits [][]float32
			if len(toks) > 0 {
				if logits, err = s.Prefill(toks, t == nil); err != nil {
					return err
				}
			}
			if t != nil {
				if logits, err = s.Verify(*t); err != nil {
					return err
				}
			}
			if err := writeLogits(out, logits); err != nil {
				return err
			}
			am := make([]string, len(logits))
			for i, l := range logits {
				am[i] = strconv.Itoa(kernels.ArgmaxRow(l))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "n_vocab=%d rows=%d argmax=[%s] out=%s\n", m.Program().Config.NVocab, len(logits), strings.Join(am, ","), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "GGUF model file or fixture name")
	cmd.Flags().StringVar(&tokens, "tokens", "", "comma-separated token ids")
	cmd.Flags().StringVar(&prompt, "prompt", "", "text to tokenize with the model's tokenizer instead of --tokens")
	cmd.Flags().BoolVar(&parseSpecial, "parse-special", false, "with --prompt: recognise special tokens written in the text")
	cmd.Flags().StringVar(&tree, "verify-tree", "", "draft tree as tok:parent,tok:parent,...")
	cmd.Flags().StringVar(&out, "out", "", "output file")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().IntVar(&ctx, "context", 0, contextHelp)
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cache.add(cmd)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	adapters.register(cmd)
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func parseInts(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad token %q", f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

func parseTree(s string) (*engine.Tree, error) {
	t := &engine.Tree{}
	for _, node := range strings.Split(s, ",") {
		tok, par, ok := strings.Cut(strings.TrimSpace(node), ":")
		if !ok {
			return nil, fmt.Errorf("node %q is not tok:parent", node)
		}
		tv, err := strconv.ParseInt(tok, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("node %q: bad token", node)
		}
		pv, err := strconv.Atoi(par)
		if err != nil {
			return nil, fmt.Errorf("node %q: bad parent", node)
		}
		t.Tokens = append(t.Tokens, int32(tv))
		t.Parents = append(t.Parents, pv)
	}
	if _, err := t.Depths(); err != nil {
		return nil, err
	}
	return t, nil
}

// writeLogits writes rows to path, atomically when path is (or will be) a regular file, so an
// interrupted run leaves no partial file; to a device or pipe (/dev/stdout) directly.
func writeLogits(path string, rows [][]float32) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := writeRows(f, rows); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := writeRows(f, rows); err != nil {
		return err
	}
	return f.Commit()
}

func writeRows(f io.Writer, rows [][]float32) error {
	w := bufio.NewWriter(f)
	for _, r := range rows {
		if _, err := w.Write(device.F32Bytes(r)); err != nil {
			return err
		}
	}
	return w.Flush()
}
