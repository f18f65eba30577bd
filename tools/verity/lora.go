package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/fixtures"
	"verity/host/gguf"
	"verity/host/lora"
	"verity/host/serve"
)

// loraFlags are the adapter flags of every command that loads a model.
type loraFlags struct {
	specs     []string
	mergeType string
}

func (l *loraFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&l.specs, "lora", nil, "merge a LoRA adapter into the weights at load: FILE[:SCALE] (scale 1 by default; repeatable, the adapters sum)")
	cmd.Flags().StringVar(&l.mergeType, "lora-merge-type", "", "write the adapted tensors as f32, f16, bf16 or q8_0 instead of their own type (a diagnostic)")
}

// open opens the adapters (see openAdapters) and the merge options; close the adapters once
// the model is loaded.
func (l *loraFlags) open(cmd *cobra.Command) ([]lora.Use, lora.Options, func(), error) {
	if l.mergeType != "" && len(l.specs) == 0 {
		return nil, lora.Options{}, nil, errors.New("--lora-merge-type goes with --lora")
	}
	uses, done, err := openAdapters(l.specs, cmd)
	return uses, lora.Options{MergeType: l.mergeType}, done, err
}

// names describes the adapters for a model's display name: "+NAME" each.
func (l *loraFlags) names() string {
	var b strings.Builder
	for _, s := range l.specs {
		path, scale, _ := splitAdapterSpec(s)
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		if scale != 1 {
			name += "@" + strconv.FormatFloat(scale, 'g', -1, 64)
		}
		b.WriteString("+" + name)
	}
	return b.String()
}

// splitAdapterSpec parses FILE[:SCALE]; the text after the last colon is a scale only if it
// is a number, so a path with colons still works.
func splitAdapterSpec(s string) (string, float64, error) {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if v, err := strconv.ParseFloat(s[i+1:], 64); err == nil {
			if s[:i] == "" {
				return "", 0, fmt.Errorf("--lora %q: no file", s)
			}
			return s[:i], v, nil
		}
	}
	if s == "" {
		return "", 0, errors.New("--lora: no file")
	}
	return s, 1, nil
}

// openAdapters opens each FILE[:SCALE] of specs. A FILE that does not exist but names a
// catalogue model and adapter, MODEL+ADAPTER (verity fixture lists them), is generated.
func openAdapters(specs []string, cmd *cobra.Command) ([]lora.Use, func(), error) {
	var uses []lora.Use
	done := func() {
		for _, u := range uses {
			u.Adapter.Close()
		}
	}
	for _, s := range specs {
		path, scale, err := splitAdapterSpec(s)
		if err != nil {
			done()
			return nil, nil, err
		}
		if path, err = resolveAdapter(path); err != nil {
			done()
			return nil, nil, err
		}
		a, err := lora.Open(path)
		if err != nil {
			done()
			return nil, nil, err
		}
		uses = append(uses, lora.Use{Adapter: a, Scale: scale})
	}
	return uses, done, nil
}

// resolveAdapter maps a file, or a MODEL+ADAPTER fixture name, to a file.
func resolveAdapter(p string) (string, error) {
	if _, err := os.Stat(p); err == nil || strings.HasSuffix(p, ".gguf") || strings.ContainsRune(p, filepath.Separator) {
		return p, nil
	}
	model, adapter, ok := strings.Cut(p, "+")
	if !ok {
		return "", fmt.Errorf("adapter %s: no such file (a catalogue adapter is named MODEL+ADAPTER, see verity fixture)", p)
	}
	s, err := fixtures.Lookup(model)
	if err != nil {
		return "", fmt.Errorf("adapter %s: no such file, and %w", p, err)
	}
	a, err := fixtures.LookupAdapter(adapter)
	if err != nil {
		return "", fmt.Errorf("adapter %s: no such file, and %w", p, err)
	}
	return fixtures.AdapterPath(s, a)
}

// reportMerge says on w what a load merged.
func reportMerge(w io.Writer, r *lora.Result) {
	if r == nil {
		return
	}
	var names []string
	for _, a := range r.Adapters {
		n := a.Path
		if n == "" {
			n = a.Name
		}
		names = append(names, fmt.Sprintf("%s×%g", filepath.Base(n), a.Scale))
	}
	b := r.Blocks
	fmt.Fprintf(w, "lora: merged %s into %d tensors in %.2f s (%s private memory; blocks: %d copied, %d moved, %d clamped, %d refit, %d fresh)\n",
		strings.Join(names, " + "), r.Tensors, r.Duration.Seconds(), humanBytes(r.Bytes), b.Copied, b.Moved, b.Clamped, b.Refit, b.Fresh)
}

// serveAdapters describes the merged adapters for the service's /v1/models and /v1/stats.
func serveAdapters(r *lora.Result) []serve.Adapter {
	if r == nil {
		return nil
	}
	var out []serve.Adapter
	for _, a := range r.Adapters {
		name := filepath.Base(a.Path)
		if a.Path == "" {
			name = a.Name
		}
		out = append(out, serve.Adapter{Name: name, Scale: a.Scale, Alpha: a.Alpha, Ranks: a.Ranks, Targets: a.Targets})
	}
	return out
}

func newLoRACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lora",
		Short: "Work with LoRA adapters",
	}
	cmd.AddCommand(newLoRAMergeCmd())
	return cmd
}

func newLoRAMergeCmd() *cobra.Command {
	var out, mergeType string
	var threads int
	cmd := &cobra.Command{
		Use:   "merge BASE ADAPTER[:SCALE]... -o OUT.gguf",
		Short: "Write a model with LoRA adapters merged into its weights",
		Long: `Merge LoRA adapters (GGUF files as llama.cpp's convert_lora_to_gguf.py writes them) into
BASE, as --lora does at load, and write the result as a GGUF file. Each adapted tensor keeps
its type (or takes --lora-merge-type); the other tensors and the metadata are BASE's. With
tied embeddings and an adapted embedding, OUT gains an output.weight holding BASE's embedding,
so the output projection is unchanged, as at load. BASE may be a fixture name, and ADAPTER a
MODEL+ADAPTER fixture name.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("-o OUT.gguf is required")
			}
			basePath, _, err := resolveModel(args[0], cmd)
			if err != nil {
				return err
			}
			base, err := gguf.Open(basePath)
			if err != nil {
				return err
			}
			defer base.Close()
			uses, done, err := openAdapters(args[1:], cmd)
			if err != nil {
				return err
			}
			defer done()
			merged, res, err := lora.Merge(base, uses, lora.Options{MergeType: mergeType, Threads: threads})
			if err != nil {
				return err
			}
			reportMerge(cmd.ErrOrStderr(), res)
			w := gguf.NewWriterFrom(merged)
			for _, t := range merged.Tensors {
				if err := w.AddTensor(t.Name, t.Type, t.Dims, merged.Data(t)); err != nil {
					return err
				}
			}
			if err := w.WriteFile(out); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %d tensors, %d of them merged\n", out, len(merged.Tensors), res.Tensors)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the merged model's file")
	cmd.Flags().StringVar(&mergeType, "lora-merge-type", "", "write the adapted tensors as f32, f16, bf16 or q8_0 instead of their own type")
	cmd.Flags().IntVar(&threads, "threads", 0, "worker threads (0: all cores)")
	return cmd
}

// jsonAdapter is verity inspect --json's description of a LoRA adapter.
type jsonAdapter struct {
	Architecture string        `json:"architecture"`
	Alpha        float64       `json:"alpha"`
	Ranks        []int         `json:"ranks"`
	Targets      []jsonLoRAPar `json:"targets"`
}

type jsonLoRAPar struct {
	Tensor    string `json:"tensor"`
	Rank      int    `json:"rank"`
	Embedding bool   `json:"embedding,omitempty"`
}

// adapterJSON describes f if it is a LoRA adapter, else nil.
func adapterJSON(f *gguf.File) *jsonAdapter {
	a, err := lora.Read(f)
	if err != nil {
		return nil
	}
	j := &jsonAdapter{Architecture: a.Arch, Alpha: a.Alpha, Ranks: a.Ranks()}
	for _, p := range a.Pairs {
		j.Targets = append(j.Targets, jsonLoRAPar{Tensor: p.Target, Rank: p.Rank, Embedding: p.Embedding})
	}
	return j
}

// inspectAdapter prints what an adapter file adapts: its architecture, alpha, ranks and each
// target with its pair's shapes and types. It reports false for a file that is not an adapter.
func inspectAdapter(w io.Writer, f *gguf.File) bool {
	a, err := lora.Read(f)
	if err != nil {
		if gt, _ := f.StringOr("general.type", ""); gt == "adapter" {
			fmt.Fprintf(w, "adapter       not usable: %v\n", err)
		}
		return false
	}
	ranks := make([]string, len(a.Ranks()))
	for i, r := range a.Ranks() {
		ranks[i] = strconv.Itoa(r)
	}
	alpha := strconv.FormatFloat(a.Alpha, 'g', -1, 64)
	if a.Alpha == 0 {
		alpha += " (the scale as is)"
	}
	fmt.Fprintf(w, "adapter       LoRA for %s: %d targets, rank %s, alpha %s\n", a.Arch, len(a.Pairs), strings.Join(ranks, ", "), alpha)
	fmt.Fprintln(w, "targets:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tensor\trank\tlora_a\tlora_b\t")
	for _, p := range a.Pairs {
		note := ""
		if p.Embedding {
			note = "(the embedding: the converter's transposed pair)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s %s\t%s %s\t%s\n", p.Target, p.Rank, p.A.Type, dimsString(p.A.Dims), p.B.Type, dimsString(p.B.Dims), note)
	}
	tw.Flush()
	fmt.Fprintln(w)
	return true
}
