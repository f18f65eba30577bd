package bench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"

	"verity/host/gguf"
	"verity/host/quantize"
)

// llama.cpp's llama-bench writes one record per test with a fixed set of fields (its
// `test::get_fields`, the columns of the llama_bench table its -o sql creates, which
// scripts/compare-llama-bench.py reads back). A Test is one such record for a Verity
// measurement: llama-bench's fields with the values llama-bench would give the same run
// (settings Verity does not have hold llama-bench's defaults, so that rows of equal settings
// join), then Verity's own. The layouts of -o json, jsonl, csv, sql and md follow llama-bench's
// printers (tools/llama-bench/llama-bench.cpp at the commit in testdata/llama-bench.json).

// Test is one llama-bench test row: pp (a prompt of NPrompt tokens), tg (NGen tokens decoded
// one by one), pg (both in turn), after NDepth tokens of context; and Verity's tv, a draft tree
// of NPrompt nodes verified in one step (llama.cpp's counterpart: a batch of as many tokens).
type Test struct {
	// llama-bench's fields, in its order.
	BuildCommit         string    `json:"build_commit"`
	BuildNumber         int       `json:"build_number"`
	CPUInfo             string    `json:"cpu_info"`
	GPUInfo             string    `json:"gpu_info"`
	Backends            string    `json:"backends"`
	ModelFilename       string    `json:"model_filename"`
	ModelType           string    `json:"model_type"`
	ModelSize           int64     `json:"model_size"`
	ModelNParams        int64     `json:"model_n_params"`
	NBatch              int       `json:"n_batch"`
	NUbatch             int       `json:"n_ubatch"`
	NThreads            int       `json:"n_threads"`
	CPUMask             string    `json:"cpu_mask"`
	CPUStrict           bool      `json:"cpu_strict"`
	Poll                int       `json:"poll"`
	TypeK               string    `json:"type_k"`
	TypeV               string    `json:"type_v"`
	NGPULayers          int       `json:"n_gpu_layers"`
	NCPUMoE             int       `json:"n_cpu_moe"`
	SplitMode           string    `json:"split_mode"`
	MainGPU             int       `json:"main_gpu"`
	NoKVOffload         bool      `json:"no_kv_offload"`
	FlashAttn           int       `json:"flash_attn"`
	Devices             string    `json:"devices"`
	TensorSplit         string    `json:"tensor_split"`
	TensorBuftOverrides string    `json:"tensor_buft_overrides"`
	LoadMode            string    `json:"load_mode"`
	LazyMode            string    `json:"lazy_mode"`
	Embeddings          bool      `json:"embeddings"`
	NoOpOffload         int       `json:"no_op_offload"`
	NoHost              bool      `json:"no_host"`
	FitTarget           int64     `json:"fit_target"`
	FitMinCtx           int       `json:"fit_min_ctx"`
	NPrompt             int       `json:"n_prompt"`
	NGen                int       `json:"n_gen"`
	NDepth              int       `json:"n_depth"`
	TestTime            string    `json:"test_time"`
	AvgNS               int64     `json:"avg_ns"`
	StddevNS            int64     `json:"stddev_ns"`
	AvgTS               float64   `json:"avg_ts"`
	StddevTS            float64   `json:"stddev_ts"`
	SamplesNS           []int64   `json:"samples_ns"`
	SamplesTS           []float64 `json:"samples_ts"`

	// Verity's fields.
	Kind       string `json:"test"`  // pp, tg, pg or tv
	Model      string `json:"model"` // the name it was given (a fixture's name, a file's base name)
	Backend    string `json:"backend"`
	Megakernel bool   `json:"megakernel"`
	TreeNodes  int    `json:"tree_nodes"` // tv: the tree's nodes (= n_prompt)
	// BytesPerToken is the cost model's bytes moved per token of the test (weights, K/V and
	// activations of its steps), GBs those bytes over the mean time, ProbeGBs the memory
	// bandwidth probe's rate and FloorPct GBs as a percentage of it: how near the test runs
	// to the time the probe's bandwidth would need for its bytes.
	BytesPerToken float64 `json:"bytes_per_token"`
	GBs           float64 `json:"gb_s"`
	ProbeGBs      float64 `json:"probe_gb_s"`
	FloorPct      float64 `json:"floor_pct"`
	Verity        string  `json:"verity"`
	Dirty         bool    `json:"vcs_dirty"`
	Go            string  `json:"go"`
	OS            string  `json:"os"`
	Twin          string  `json:"twin"`
	Command       string  `json:"command"`
}

// Name is llama-bench's name of the test as its markdown table writes it ("pp512",
// "tg128 @ d512", "pp512+tg128"), with Verity's "tv8" for a tree verify.
func (t Test) Name() string {
	var s string
	switch {
	case t.Kind == "tv":
		s = fmt.Sprintf("tv%d", t.NPrompt)
	case t.NPrompt > 0 && t.NGen == 0:
		s = fmt.Sprintf("pp%d", t.NPrompt)
	case t.NGen > 0 && t.NPrompt == 0:
		s = fmt.Sprintf("tg%d", t.NGen)
	default:
		s = fmt.Sprintf("pp%d+tg%d", t.NPrompt, t.NGen)
	}
	if t.NDepth > 0 {
		s += fmt.Sprintf(" @ d%d", t.NDepth)
	}
	return s
}

// ModelInfo is what llama-bench says of a model file: llama.cpp's description of it
// (architecture, size class, file type), its tensors' bytes and values.
type ModelInfo struct {
	Filename string
	Type     string
	Size     int64
	NParams  int64
	Layers   int
}

// DescribeModel reads a model's llama-bench fields from its GGUF file: model_size and
// model_n_params are the sums of its tensors' bytes and values, model_type llama.cpp's
// llama_model_desc ("llama 1B Q4_K - Medium").
func DescribeModel(path string, f *gguf.File) ModelInfo {
	mi := ModelInfo{Filename: path}
	for _, t := range f.Tensors {
		mi.Size += t.Size
		mi.NParams += t.Elements()
	}
	arch := f.Architecture()
	n := func(key string) int64 {
		v, err := f.Int(arch + "." + key)
		if err != nil {
			return 0
		}
		return v
	}
	mi.Layers = int(n("block_count"))
	vocab := n("vocab_size")
	if vocab == 0 {
		if toks, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
			vocab = int64(len(toks))
		}
	}
	ft := "all F32"
	if v, err := f.Int("general.file_type"); err == nil {
		ft = ftypeName(quantize.FileType(v))
	}
	mi.Type = fmt.Sprintf("%s %s %s", arch, sizeClass(arch, mi.Layers, n("embedding_length"), n("attention.head_count"),
		n("attention.head_count_kv"), n("expert_count"), vocab), ft)
	return mi
}

// ftypeName is llama.cpp's name of a file type in a model's description (llama_ftype_name).
func ftypeName(ft quantize.FileType) string {
	names := map[quantize.FileType]string{
		quantize.FileF32: "all F32", quantize.FileF16: "F16", quantize.FileBF16: "BF16",
		quantize.FileQ2_K: "Q2_K - Medium", quantize.FileQ3_KS: "Q3_K - Small", quantize.FileQ3_KM: "Q3_K - Medium",
		quantize.FileQ3_KL: "Q3_K - Large", quantize.FileQ4_KS: "Q4_K - Small", quantize.FileQ4_KM: "Q4_K - Medium",
		quantize.FileQ5_KS: "Q5_K - Small", quantize.FileQ5_KM: "Q5_K - Medium",
	}
	if s, ok := names[ft]; ok {
		return s
	}
	if ft.Known() {
		return ft.String() // Q4_0, Q8_0, Q6_K, …: llama.cpp's name is the type's
	}
	return "unknown, may not work"
}

// sizeClass is the size llama.cpp gives a model of an architecture Verity loads in its
// description, from the layer count and shape it recognises ("?B" for any other).
func sizeClass(arch string, layers int, embd, heads, headsKV, experts, vocab int64) string {
	switch arch {
	case "llama":
		if experts == 8 {
			switch layers {
			case 32:
				return "8x7B"
			case 56:
				return "8x22B"
			}
			return "?B"
		}
		switch layers {
		case 16, 22:
			return "1B"
		case 26, 28:
			return "3B"
		case 30:
			return "256M"
		case 32:
			switch {
			case vocab == 49152:
				return "3B"
			case vocab < 40000:
				return "7B"
			}
			return "8B"
		case 36:
			return "8B"
		case 40:
			return "13B"
		case 48:
			return "34B"
		case 60:
			return "30B"
		case 80:
			if heads == headsKV {
				return "65B"
			}
			return "70B"
		}
	case "qwen2":
		switch layers {
		case 24:
			if embd == 1024 {
				return "0.5B"
			}
			return "1B"
		case 28:
			if embd == 1536 {
				return "1.5B"
			}
			return "7B"
		case 32:
			return "7B"
		case 36:
			return "3B"
		case 40:
			if heads == 20 {
				return "4B"
			}
			return "13B"
		case 48:
			return "14B"
		case 64:
			return "32B"
		case 80:
			return "70B"
		}
	case "qwen3":
		switch layers {
		case 28:
			if embd == 1024 {
				return "0.6B"
			}
			return "1.7B"
		case 36:
			if embd == 2560 {
				return "4B"
			}
			return "8B"
		case 40:
			return "14B"
		case 64:
			return "32B"
		}
	case "qwen3moe":
		switch layers {
		case 48:
			return "30B.A3B"
		case 94:
			return "235B.A22B"
		}
	case "qwen35moe":
		switch layers {
		case 40:
			return "35B.A3B"
		case 48:
			return "122B.A10B"
		case 60:
			return "397B.A17B"
		}
	case "phi3":
		switch layers {
		case 24:
			return "1B"
		case 32:
			return "3B"
		case 40:
			return "14B"
		}
	}
	return "?B"
}

// CPUInfo is llama.cpp's description of the CPU: /proc/cpuinfo's model name on Linux, else
// the processor's brand string.
func CPUInfo() string {
	if runtime.GOOS == "linux" {
		if f, err := os.Open("/proc/cpuinfo"); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.HasPrefix(k, "model name") {
					return strings.TrimSpace(v)
				}
			}
		}
	}
	if b := strings.TrimSpace(cpuid.CPU.BrandName); b != "" {
		return b
	}
	return "CPU"
}

// backendFields maps Verity backend names (a pipeline: "cpu (2 threads), cuda:0 (…)") to
// llama-bench's backends and gpu_info: CPU for the twins, CUDA and the device's name for a
// GPU, PTXVM for the PTX interpreter.
func backendFields(names []string) (backends, gpus string) {
	var bs, gs []string
	add := func(list []string, s string) []string {
		for _, x := range list {
			if x == s {
				return list
			}
		}
		return append(list, s)
	}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "cuda"):
			bs = add(bs, "CUDA")
			if _, rest, ok := strings.Cut(n, "("); ok {
				gs = append(gs, strings.TrimSpace(strings.SplitN(rest, ",", 2)[0]))
			}
		case strings.HasPrefix(n, "ptxvm"):
			bs = add(bs, "PTXVM")
		}
	}
	if len(bs) == 0 {
		return "CPU", ""
	}
	return strings.Join(bs, ","), strings.Join(gs, ", ")
}

// TestOptions are what a Result's rows say beyond the Result itself.
type TestOptions struct {
	Model    ModelInfo
	Backends []string // each stage's backend name
	CacheK   string   // the K/V cache's element types (llama-bench's type_k, type_v), if not the Result's
	CacheV   string
	PG       bool // add the pg row (prompt then generation)
}

// Tests returns r's llama-bench rows: pp (when r has a prompt), tg (when it decoded), pg (with
// o.PG) and tv.
func Tests(r Result, o TestOptions) []Test {
	backends, gpus := backendFields(o.Backends)
	base := Test{
		BuildCommit: buildCommit(r.Host.Verity), BuildNumber: 0, CPUInfo: CPUInfo(), GPUInfo: gpus, Backends: backends,
		ModelFilename: o.Model.Filename, ModelType: o.Model.Type, ModelSize: o.Model.Size, ModelNParams: o.Model.NParams,
		NBatch: r.StepRows, NUbatch: r.StepRows, NThreads: r.Threads, CPUMask: "0x0", Poll: 50,
		TypeK: orF32(o.CacheK, r.CacheK), TypeV: orF32(o.CacheV, r.CacheV), NGPULayers: -1, SplitMode: "layer", FlashAttn: -1, Devices: "auto",
		TensorSplit: "0.00", TensorBuftOverrides: "none", LoadMode: "auto", LazyMode: "auto", TestTime: r.Host.Time,
		Model: r.Model, Backend: r.Backend, Megakernel: r.Megakernel, ProbeGBs: r.ProbeGBs,
		Verity: r.Host.Verity, Dirty: r.Host.Dirty, Go: r.Host.Go, OS: r.Host.OS, Twin: r.Host.Twin, Command: r.Host.Command,
	}
	var out []Test
	add := func(kind string, prompt, gen, depth int, ns []int64, bytes float64) {
		t := base
		t.Kind, t.NPrompt, t.NGen, t.NDepth = kind, prompt, gen, depth
		t.setSamples(ns)
		if n := prompt + gen; n > 0 {
			t.BytesPerToken = bytes / float64(n)
		}
		if t.AvgNS > 0 {
			t.GBs = bytes / float64(t.AvgNS)
		}
		if t.ProbeGBs > 0 {
			t.FloorPct = 100 * t.GBs / t.ProbeGBs
		}
		out = append(out, t)
	}
	decodeBytes := r.BytesPerToken * float64(r.Decoded)
	if r.Prompt > 0 && len(r.PrefillNS) > 0 {
		add("pp", r.Prompt, 0, r.Depth, r.PrefillNS, r.PrefillBytes)
	}
	if r.Decoded > 0 && len(r.DecodeNS) > 0 {
		add("tg", 0, r.Decoded, r.Depth+r.Prompt, r.DecodeNS, decodeBytes)
	}
	if o.PG && r.Prompt > 0 && r.Decoded > 0 && len(r.PrefillNS) == len(r.DecodeNS) {
		ns := make([]int64, len(r.PrefillNS))
		for i := range ns {
			ns[i] = r.PrefillNS[i] + r.DecodeNS[i]
		}
		add("pg", r.Prompt, r.Decoded, r.Depth, ns, r.PrefillBytes+decodeBytes)
	}
	if len(r.VerifyNS) > 0 {
		add("tv", r.TreeNodes, 0, r.Depth+r.Prompt+r.Decoded, r.VerifyNS, r.VerifyBytes)
		out[len(out)-1].TreeNodes = r.TreeNodes
	}
	return out
}

// setSamples sets the samples and their means and standard deviations as llama-bench
// computes them: t/s of each sample from its tokens (n_prompt + n_gen) and time; integer
// nanoseconds; the sample standard deviation (0 for one sample).
func (t *Test) setSamples(ns []int64) {
	t.SamplesNS = append([]int64(nil), ns...)
	t.SamplesTS = make([]float64, len(ns))
	fs := make([]float64, len(ns))
	n := float64(t.NPrompt + t.NGen)
	for i, x := range ns {
		fs[i] = float64(x)
		if x > 0 {
			t.SamplesTS[i] = 1e9 * n / float64(x)
		}
	}
	m, sd := meanSD(fs)
	t.AvgNS, t.StddevNS = int64(m), int64(sd)
	t.AvgTS, t.StddevTS = meanSD(t.SamplesTS)
}

// buildCommit is the short source revision in a provenance's version ("devel 1a2b3c…"), as
// llama-bench's build_commit is llama.cpp's (7 hex digits), or "unknown".
func buildCommit(verity string) string {
	for _, f := range strings.Fields(verity) {
		if len(f) >= 7 && strings.Trim(f, "0123456789abcdef") == "" {
			return f[:7]
		}
	}
	return "unknown"
}

// orF32 is the first type named, else f32.
func orF32(types ...string) string {
	for _, t := range types {
		if t != "" {
			return t
		}
	}
	return "f32"
}

// A field is one column of a row: llama-bench's type of it and its value as llama-bench
// writes it (std::to_string: integers, booleans as 0 and 1, floats with six decimals).
type field struct {
	name, kind, value string // kind: text, bool, int, real
}

func (t Test) fields() (llama, verity []field) {
	s := func(n, v string) field { return field{n, "text", v} }
	i := func(n string, v int64) field { return field{n, "int", strconv.FormatInt(v, 10)} }
	b := func(n string, v bool) field {
		if v {
			return field{n, "bool", "1"}
		}
		return field{n, "bool", "0"}
	}
	r := func(n string, v float64) field {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0
		}
		return field{n, "real", strconv.FormatFloat(v, 'f', 6, 64)}
	}
	llama = []field{
		s("build_commit", t.BuildCommit), i("build_number", int64(t.BuildNumber)), s("cpu_info", t.CPUInfo), s("gpu_info", t.GPUInfo),
		s("backends", t.Backends), s("model_filename", t.ModelFilename), s("model_type", t.ModelType), i("model_size", t.ModelSize),
		i("model_n_params", t.ModelNParams), i("n_batch", int64(t.NBatch)), i("n_ubatch", int64(t.NUbatch)), i("n_threads", int64(t.NThreads)),
		s("cpu_mask", t.CPUMask), b("cpu_strict", t.CPUStrict), i("poll", int64(t.Poll)), s("type_k", t.TypeK), s("type_v", t.TypeV),
		i("n_gpu_layers", int64(t.NGPULayers)), i("n_cpu_moe", int64(t.NCPUMoE)), s("split_mode", t.SplitMode), i("main_gpu", int64(t.MainGPU)),
		b("no_kv_offload", t.NoKVOffload), i("flash_attn", int64(t.FlashAttn)), s("devices", t.Devices), s("tensor_split", t.TensorSplit),
		s("tensor_buft_overrides", t.TensorBuftOverrides), s("load_mode", t.LoadMode), s("lazy_mode", t.LazyMode), b("embeddings", t.Embeddings),
		i("no_op_offload", int64(t.NoOpOffload)), b("no_host", t.NoHost), i("fit_target", t.FitTarget), i("fit_min_ctx", int64(t.FitMinCtx)),
		i("n_prompt", int64(t.NPrompt)), i("n_gen", int64(t.NGen)), i("n_depth", int64(t.NDepth)), s("test_time", t.TestTime),
		i("avg_ns", t.AvgNS), i("stddev_ns", t.StddevNS), r("avg_ts", t.AvgTS), r("stddev_ts", t.StddevTS),
	}
	verity = []field{
		s("test", t.Kind), s("model", t.Model), s("backend", t.Backend), b("megakernel", t.Megakernel), i("tree_nodes", int64(t.TreeNodes)),
		r("bytes_per_token", t.BytesPerToken), r("gb_s", t.GBs), r("probe_gb_s", t.ProbeGBs), r("floor_pct", t.FloorPct),
		s("verity", t.Verity), b("vcs_dirty", t.Dirty), s("go", t.Go), s("os", t.OS), s("twin", t.Twin), s("command", t.Command),
	}
	return llama, verity
}

// LlamaBenchFields are llama-bench's field names in its order (the llama_bench table's
// columns), and VerityFields the columns Verity adds after them.
func LlamaBenchFields() []string {
	l, _ := Test{}.fields()
	return names(l)
}

// VerityFields are the columns a Verity row has after llama-bench's (and, in JSON, after its
// samples_ns and samples_ts).
func VerityFields() []string {
	_, v := Test{}.fields()
	return names(v)
}

func names(fs []field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}
