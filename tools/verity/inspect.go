package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/device/dtype"
	"verity/host/gguf"
)

func newInspectCmd() *cobra.Command {
	var asJSON bool
	var maxArray int
	cmd := &cobra.Command{
		Use:   "inspect FILE|FIXTURE",
		Short: "Print a GGUF file's metadata and tensor table",
		Long: `Print a GGUF file's architecture, parameter count, file type, metadata (long arrays
summarised) and tensor table with per-type byte totals. With --json, print one JSON object
{"metadata": {key: value}, "tensors": [{name, type, dims, offset, bytes}]} with full values.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, _, err := resolveModel(args[0], cmd)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if asJSON {
				return inspectJSON(cmd.OutOrStdout(), f)
			}
			return inspectText(cmd.OutOrStdout(), f, maxArray)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&maxArray, "max-array", 8, "array elements shown before summarising")
	return cmd
}

// fileTypeNames are llama.cpp's llama_ftype names.
var fileTypeNames = map[uint32]string{
	0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
	11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium",
	16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K - Small",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
	29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4 MoE",
}

func inspectText(w io.Writer, f *gguf.File, maxArray int) error {
	arch := f.Architecture()
	if arch == "" {
		arch = "(none)"
	}
	var params int64
	type total struct {
		n     int
		bytes int64
	}
	byType := map[dtype.Type]*total{}
	for _, t := range f.Tensors {
		params += t.Elements()
		tt := byType[t.Type]
		if tt == nil {
			tt = &total{}
			byType[t.Type] = tt
		}
		tt.n++
		tt.bytes += t.Size
	}
	ft := "(not set)"
	if v, err := f.Int("general.file_type"); err == nil {
		ft = fmt.Sprintf("%d", v)
		if name, ok := fileTypeNames[uint32(v)]; ok {
			ft += " (" + name + ")"
		}
	}
	fmt.Fprintf(w, "architecture  %s\n", arch)
	if name, err := f.String("general.name"); err == nil {
		fmt.Fprintf(w, "name          %s\n", name)
	}
	fmt.Fprintf(w, "parameters    %d (%s)\n", params, humanCount(params))
	fmt.Fprintf(w, "file type     %s\n", ft)
	fmt.Fprintf(w, "gguf          v%d, alignment %d, %d metadata keys, %d tensors, data at %d\n\n",
		f.Version, f.Alignment, len(f.KVs), len(f.Tensors), f.DataOffset)
	inspectAdapter(w, f)

	fmt.Fprintln(w, "metadata:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range f.KVs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", kv.Key, typeName(kv.Value), gguf.FormatValue(kv.Value, maxArray))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntensors:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\ttype\tdims\toffset\tbytes")
	for _, t := range f.Tensors {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", t.Name, t.Type, dimsString(t.Dims), t.Offset, t.Size)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nbytes by type:")
	types := make([]dtype.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var all int64
	for _, t := range types {
		fmt.Fprintf(tw, "  %s\t%d tensors\t%d bytes\t%s\t\n", t, byType[t].n, byType[t].bytes, humanBytes(byType[t].bytes))
		all += byType[t].bytes
	}
	fmt.Fprintf(tw, "  total\t%d tensors\t%d bytes\t%s\t\n", len(f.Tensors), all, humanBytes(all))
	return tw.Flush()
}

func typeName(v gguf.Value) string {
	if e, ok := v.Elem(); ok {
		return fmt.Sprintf("[%d]%s", v.Len(), e)
	}
	return v.Type().String()
}

func dimsString(d []int64) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

type jsonTensor struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Dims   []int64 `json:"dims"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
}

func inspectJSON(w io.Writer, f *gguf.File) error {
	meta := make(map[string]any, len(f.KVs))
	for _, kv := range f.KVs {
		meta[kv.Key] = jsonValue(kv.Value)
	}
	ts := make([]jsonTensor, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = jsonTensor{Name: t.Name, Type: t.Type.String(), Dims: t.Dims, Offset: t.Offset, Bytes: t.Size}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Metadata map[string]any `json:"metadata"`
		Tensors  []jsonTensor   `json:"tensors"`
		Adapter  *jsonAdapter   `json:"adapter,omitempty"`
	}{meta, ts, adapterJSON(f)})
}

// jsonValue converts a metadata value into something encoding/json prints as the value
// itself ([]uint8 would otherwise become base64; non-finite floats become strings).
func jsonValue(v gguf.Value) any {
	switch x := v.Any().(type) {
	case []uint8:
		out := make([]int, len(x))
		for i, b := range x {
			out[i] = int(b)
		}
		return out
	case []gguf.Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case float32:
		return jsonFloat(float64(x))
	case float64:
		return jsonFloat(x)
	case []float32:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonFloat(float64(e))
		}
		return out
	case []float64:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonFloat(e)
		}
		return out
	default:
		return x
	}
}

func jsonFloat(f float64) any {
	if f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
		return fmt.Sprint(f)
	}
	return f
}
