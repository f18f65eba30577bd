//go:build linux

package engine_test

import (
	"encoding/json"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/machine"
	"verity/host/machine/machinetest"
	"verity/host/plan"
)

// streamSpec is a dense llama of 48 small layers, 140 MB of float32 weights: at least twice the
// memory limit of the streaming test, in layers of 3 MB (several fit in the memory left), and
// cheap to compute beside its disk reads.
var streamSpec = fixtures.Spec{Name: "stream-llama-f32", Arch: "llama", NLayer: 48, NEmbd: 256, NFF: 768, NHead: 8, NHeadKV: 2,
	HeadDim: 32, NVocab: 1024, NCtx: 256, RopeBase: 10000, Eps: 1e-5, Seed: 21, FileType: fixtures.FileF32,
	Types: fixtures.Pure(dtype.F32, 48)}

// streamLimit is the memory cgroup's limit: under half the model.
const streamLimit = 64 << 20

// streamRun is what a streaming child reports.
type streamRun struct {
	Logits     string        `json:"logits"` // a file of every row, float32
	Decode     time.Duration `json:"decode"` // the decoded tokens' time
	Tokens     int           `json:"tokens"`
	Weights    engine.Weights
	Budget     int64 `json:"budget"`
	PeakRSS    int64 `json:"peak_rss"`
	Prefetched bool
}

// A model twice the memory limit runs to completion under it, computing from its packed file
// with the prefetcher (and again without), with the logits of an unlimited run; its decode
// rate is reported against the disk-bound prediction: the streamed bytes at the file's read
// speed.
func TestStreamUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	path, err := fixtures.SpecPath(streamSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 2*streamLimit {
		t.Fatalf("the model has %d bytes, under twice the limit", st.Size())
	}
	dir := t.TempDir()
	child := func(g *machinetest.Group, prefetch string, n int) streamRun {
		t.Helper()
		out := filepath.Join(dir, prefetch+".json")
		cmd := osexec.Command(os.Args[0], "-test.run=^TestStreamChild$", "-test.v")
		cmd.Env = append(os.Environ(), "VERITY_STREAM_CHILD="+strings.Join([]string{path, prefetch, out, strconv.Itoa(n)}, ","))
		var log strings.Builder
		cmd.Stdout, cmd.Stderr = &log, &log
		if g != nil {
			err = g.Start(cmd)
		} else {
			err = cmd.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			kills := 0
			if g != nil {
				kills = g.OOMKills()
			}
			t.Fatalf("%s run: %v (OOM kills %d): %s", prefetch, err, kills, log.String())
		}
		var r streamRun
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	const n = 8
	ref := child(nil, "auto", n) // unlimited: also writes the packed file
	if ref.Weights.Streaming || ref.Weights.Packed == "" {
		t.Fatalf("the unlimited run: %+v", ref.Weights)
	}
	want, _ := os.ReadFile(ref.Logits)
	for _, prefetch := range []string{"auto", "off"} {
		g := machinetest.Limited(t, streamLimit)
		dropCache(t, path, ref.Weights.Packed)
		r := child(g, prefetch, n)
		got, _ := os.ReadFile(r.Logits)
		if len(got) != len(want) || string(got) != string(want) {
			t.Fatalf("prefetch %s under %d MB: the logits differ from the unlimited run's", prefetch, streamLimit>>20)
		}
		if !r.Weights.Streaming || r.Prefetched != (prefetch == "auto") || r.Budget > streamLimit {
			t.Errorf("prefetch %s: streaming %v, prefetching %v, budget %d", prefetch, r.Weights.Streaming, r.Prefetched, r.Budget)
		}
		peak, _ := g.Peak()
		tps := float64(r.Tokens) / r.Decode.Seconds()
		// the plan's prediction for the child's load: its budget, its workload
		pr := predictStream(t, path, r.Budget, prefetch == "off", n)
		t.Logf("prefetch %s, %d MB limit (peak charged %d MB, RSS %d MB) on a %d MB model: %.2f tok/s decoding, the plan predicts %.2f (%s-bound; %d MB streamed a token): %.2f×",
			prefetch, streamLimit>>20, peak>>20, r.PeakRSS>>20, st.Size()>>20, tps, pr.DecodeTPS, pr.Bound, r.Weights.StreamedBytes>>20, tps/pr.DecodeTPS)
		// (a loose bound: the disk and the cores are shared, and the figure is in the README)
		if ratio := tps / pr.DecodeTPS; ratio < 0.1 || ratio > 3 {
			t.Errorf("prefetch %s: %.2f tok/s, %.2f× the plan's %.2f", prefetch, tps, ratio, pr.DecodeTPS)
		}
		if g.OOMKills() > 0 {
			t.Errorf("prefetch %s: %d processes OOM-killed", prefetch, g.OOMKills())
		}
	}
}

// predictStream is the plan's prediction for the streaming child's load (made here, outside the
// cgroup: the kernels it times would not fit in it).
func predictStream(t *testing.T, path string, budget int64, noPrefetch bool, n int) *plan.Prediction {
	t.Helper()
	m, err := machine.Load()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	be := cpu.New(2)
	defer be.Close()
	o := engine.LoadOptions{MaxRows: 16, Context: 64, Budget: budget}
	if noPrefetch {
		o.Prefetch = engine.PrefetchOff
	}
	pl, err := plan.Make(f, "stream", m, plan.Options{Load: o, Backends: []device.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	if !pl.Weights.Streaming {
		t.Fatalf("the plan for a budget of %d does not stream: %+v", budget, pl.Weights)
	}
	if err := pl.Predict(m, 2, plan.Workload{Prompt: 8, Decode: n}); err != nil {
		t.Fatal(err)
	}
	return pl.Predicted
}

// dropCache writes back and drops the files' pages from the page cache, so that the next
// reader reads them from the disk (and is charged for them in its cgroup).
func dropCache(t *testing.T, paths ...string) {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Sync()
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}

// TestStreamChild is the streaming test's child: it loads the model, prefills a prompt and
// decodes greedily, and writes the logits and its report.
func TestStreamChild(t *testing.T) {
	env := os.Getenv("VERITY_STREAM_CHILD")
	if env == "" {
		t.Skip("run by TestStreamUnderMemoryLimit")
	}
	args := strings.Split(env, ",")
	path, prefetch, out := args[0], args[1], args[2]
	n, _ := strconv.Atoi(args[3])
	o := engine.LoadOptions{MaxRows: 16, Context: 64}
	if prefetch == "off" {
		o.Prefetch = engine.PrefetchOff
	}
	m, err := engine.Load(path, cpu.New(2), o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := streamRun{Weights: m.Weights, Budget: m.Weights.Budget, Prefetched: m.Weights.Prefetching, Tokens: n}
	prompt := []int32{1, 5, 9, 300, 42, 7, 1000, 3}
	s := m.NewSession()
	rows, err := s.Prefill(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range n {
		last := rows[len(rows)-1]
		tok := int32(0)
		for i, v := range last {
			if v > last[tok] {
				tok = int32(i)
			}
		}
		l, err := s.Decode(tok)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, l)
	}
	r.Decode = time.Since(start)
	var buf []byte
	for _, row := range rows {
		for _, v := range row {
			buf = append(buf, byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24))
		}
	}
	r.Logits = out + ".f32"
	if err := os.WriteFile(r.Logits, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	r.PeakRSS = peakRSS() // (not getrusage's: a child started by vfork inherits its parent's peak)
	b, _ := json.Marshal(r)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// peakRSS is the process's peak resident memory (VmHWM), 0 where /proc does not say.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
