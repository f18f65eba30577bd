package engine_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"verity/device/cpu"
	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/machine"
	"verity/host/machine/machinetest"
)

// openFixture opens a catalogue fixture's cached file (mapped, so that loads use a packed file).
func openFixture(t testing.TB, name string) *gguf.File {
	t.Helper()
	path, err := fixtures.Path(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run prefills prompt and decodes n greedy tokens, returning every logits row.
func runGreedy(t testing.TB, m *engine.Model, prompt []int32, n int) [][]float32 {
	t.Helper()
	s := m.NewSession()
	defer s.Close()
	rows, err := s.Prefill(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
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
	return rows
}

// A model computed from its packed file — mapped, read ahead and dropped behind by the
// prefetcher or not — gives the bits of one packed in memory.
func TestPackedWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, name := range []string{"tiny-llama-q8_0", "tiny-qwen3moe-q8_0", "tiny-q35moe-q4_0", "small-llama-q4_k_m", "tiny-llama-tied-f32"} {
		t.Run(name, func(t *testing.T) {
			ref := loadWith(t, name, 2, engine.LoadOptions{MaxRows: 8, Context: 48})
			if ref.Weights.Packed != "" {
				t.Fatalf("a parsed fixture used a packed file: %+v", ref.Weights)
			}
			prompt := randTokens(r, 11, ref.Program().Config.NVocab)
			want := runGreedy(t, ref, prompt, 6)
			for _, o := range []engine.LoadOptions{
				{MaxRows: 8, Context: 48},
				{MaxRows: 8, Context: 48, Prefetch: engine.PrefetchOn},
				{MaxRows: 8, Context: 48, Prefetch: engine.PrefetchOn, KeepBehind: true},
				{MaxRows: 8, Context: 48, Budget: 1 << 20}, // streams: the weights exceed the budget
				{MaxRows: 8, Context: 48, InMemory: true},
			} {
				f := openFixture(t, name)
				m, err := engine.FromFile(f, cpu.New(2), o)
				if err != nil {
					var me *engine.MemoryError
					if o.Budget > 0 && errors.As(err, &me) {
						continue // the private memory alone exceeds the tiny budget
					}
					t.Fatal(err)
				}
				got := runGreedy(t, m, prompt, 6)
				w := m.Weights
				m.Close()
				if (w.Packed != "") == o.InMemory {
					t.Errorf("%+v: packed file %q", o, w.Packed)
				}
				if w.Prefetching != (o.Prefetch == engine.PrefetchOn || o.Budget > 0 && w.Streaming) {
					t.Errorf("%+v: prefetching %v (streaming %v)", o, w.Prefetching, w.Streaming)
				}
				for i := range want {
					sameBits(t, name, got[i], want[i])
				}
			}
		})
	}
}

// A load that does not fit is refused before anything is allocated, with the numbers.
func TestMemoryRefused(t *testing.T) {
	f := openFixture(t, "small-llama-q4_k_m")
	defer f.Close()
	for _, o := range []engine.LoadOptions{
		{MaxRows: 8, Context: 100_000_000, Sessions: 1},
		{MaxRows: 8, Context: 1000, Sessions: 1 << 20},
		{MaxRows: 8, Context: 512, Budget: 1 << 20},
	} {
		_, err := engine.FromFile(f, cpu.New(1), o)
		var me *engine.MemoryError
		if !errors.As(err, &me) || !errors.Is(err, engine.ErrMemory) {
			t.Fatalf("%+v: %v, want a MemoryError", o, err)
		}
		if me.Need <= me.Have || me.Parts[0].Bytes <= 0 || !strings.Contains(err.Error(), "K/V cache") {
			t.Errorf("%+v: %v", o, err)
		}
		if me.MaxContext > 0 && o.Budget > 0 {
			// the largest context it names does fit
			o.Context = me.MaxContext
			m, err := engine.FromFile(f, cpu.New(1), o)
			if err != nil {
				t.Fatalf("the context the error names, %d: %v", me.MaxContext, err)
			}
			m.Engine.Executor().Close()
		}
		t.Log(err)
	}
}

// The footprint's parts add up to what the executor allocates.
func TestFootprint(t *testing.T) {
	for _, name := range []string{"tiny-llama-q8_0", "tiny-q35moe-q4_0", "tiny-llama-tied-f32"} {
		f, err := fixtures.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 40, Sessions: 2})
		if err != nil {
			t.Fatal(err)
		}
		fp := m.Weights.Footprint
		c := m.Engine.Executor().(*exec.Executor).Backend().(*cpu.Backend)
		if fp.Private() != fp.Total() || fp.Mapped() != 0 {
			t.Errorf("%s in memory: %+v", name, fp)
		}
		if got := c.Allocated(); got < fp.KV+fp.States+fp.Scratch {
			t.Errorf("%s: allocated %d < K/V %d + states %d + scratch %d", name, got, fp.KV, fp.States, fp.Scratch)
		}
		if fp.KVPerSlot*int64(2*40+8) != fp.KV {
			t.Errorf("%s: K/V %d, %d per slot", name, fp.KV, fp.KVPerSlot)
		}
		m.Close()
	}
}

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
	ReadSpeed  float64
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
		predicted := r.ReadSpeed / float64(r.Weights.StreamedBytes)
		t.Logf("prefetch %s, %d MB limit (peak charged %d MB, RSS %d MB) on a %d MB model: %.2f tok/s decoding, against %.2f predicted (%d MB streamed a token at %.0f MB/s): %.2f×",
			prefetch, streamLimit>>20, peak>>20, r.PeakRSS>>20, st.Size()>>20, tps, predicted, r.Weights.StreamedBytes>>20, r.ReadSpeed/1e6, tps/predicted)
		if g.OOMKills() > 0 {
			t.Errorf("prefetch %s: %d processes OOM-killed", prefetch, g.OOMKills())
		}
	}
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
	mach, err := machine.Load()
	if err != nil {
		t.Fatal(err)
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
	if d, err := mach.ReadSpeed(path); err == nil {
		r.ReadSpeed = d.BytesPerSec
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
