// Package standin is a stand-in for the CUDA backend's test binary (device/cuda's cuda.test)
// in the GPU check's dry runs: it has the real binary's tests and flags, writes records of the
// same kinds, and does what $STANDIN says each test does, so that the runner and the report
// can be exercised on a machine without a GPU. STANDIN is a comma-separated list of
// Test=action, the actions being pass (the default), fail, hang (sleep until the test
// timeout), panic, exit (the process exits mid-test), lost (the device faults) and die (the
// whole binary exits before its first test, as a cuda-tagged binary does when cuInit fails;
// give it as die=1).
package standin

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var (
	_ = flag.String("goldens", "", "the goldens file")
	_ = flag.Bool("fault", false, "run TestFaultIsSticky")
)

func TestMain(m *testing.M) {
	if action("die") != "" {
		fmt.Println(`Error in initialization, please refer to "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html" for details on: UnknownErrorCode:34`)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// action returns what STANDIN says the test named does ("" for nothing said).
func action(test string) string {
	for _, a := range strings.Split(os.Getenv("STANDIN"), ",") {
		if k, v, ok := strings.Cut(a, "="); ok && k == test {
			return v
		}
	}
	return ""
}

// record writes a RESULT record as the real tests do.
func record(t *testing.T, kind string, data any) {
	line, err := json.Marshal(struct {
		Kind string `json:"kind"`
		Test string `json:"test"`
		Data any    `json:"data"`
	}{kind, t.Name(), data})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT %s", line)
	if path := os.Getenv("VERITY_RESULTS"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write(append(line, '\n'))
	}
}

// act does what STANDIN says for t, then records what a passing test would.
func act(t *testing.T, records func()) {
	switch a := action(t.Name()); a {
	case "", "pass":
	case "fail":
		t.Fatalf("%s: stand-in failure", t.Name())
	case "hang":
		t.Logf("%s: hanging", t.Name())
		time.Sleep(time.Hour)
	case "panic":
		panic("stand-in panic in " + t.Name())
	case "exit":
		fmt.Println("SIGSEGV: segmentation violation (stand-in)")
		os.Exit(2)
	case "lost":
		record(t, "conformance", map[string]any{"kernels": 3, "launches": 7, "failed": 1, "lost": "matvec_q4_K case 4096x2048",
			"not_run": 40, "lost_error": "cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered"})
		t.Fatalf("case 4096x2048: the device was lost: cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
	default:
		t.Fatalf("unknown stand-in action %q", a)
	}
	if records != nil {
		records()
	}
}

func TestProbe(t *testing.T)                    { act(t, nil) }
func TestOpenBadOrdinal(t *testing.T)           { act(t, nil) }
func TestMemory(t *testing.T)                   { act(t, nil) }
func TestDriverErrorNames(t *testing.T)         { act(t, nil) }
func TestSharedMemoryOptIn(t *testing.T)        { act(t, nil) }
func TestStagedTransfers(t *testing.T)          { act(t, nil) }
func TestCaptureRefusesOtherCalls(t *testing.T) { act(t, nil) }
func TestTimeline(t *testing.T)                 { act(t, nil) }
func TestHostTransfer(t *testing.T)             { act(t, nil) }
func TestForwardMatchesTwin(t *testing.T)       { act(t, nil) }

func TestInfo(t *testing.T) {
	act(t, func() {
		record(t, "device", map[string]any{"name": "NVIDIA H200", "major": 9, "minor": 0, "sms": 132, "total_mem": 150e9,
			"driver": 13000, "peak_gb_s": 4800})
	})
}

func TestModules(t *testing.T) {
	act(t, func() {
		for _, m := range []string{"matvec", "megakernel"} {
			rec := map[string]any{"module": m, "code": "sm_90 cubin", "load_ms": 1.5}
			if m == "megakernel" {
				rec["kernels"] = map[string]any{"megakernel": map[string]any{"registers": 128, "static_shared": 0, "local": 16,
					"max_threads": 512, "binary_version": 90}}
			}
			record(t, "module", rec)
		}
	})
}

func TestConformance(t *testing.T) {
	act(t, func() {
		record(t, "conformance", map[string]any{"kernels": 40, "skipped": 0, "launches": 300, "failed": 0, "bytes": 123})
	})
}

func TestGoldens(t *testing.T) {
	act(t, func() {
		record(t, "goldens", map[string]any{"fixtures": 38, "match": 38, "mismatch": nil, "failed": nil, "unsupported": nil})
	})
}

func TestGraphMatchesEager(t *testing.T) {
	act(t, func() {
		record(t, "graph", map[string]any{"nodes": 6, "eager_us_per_sequence": 40, "graph_us_per_sequence": 12})
	})
}

func TestBandwidth(t *testing.T) {
	act(t, func() {
		record(t, "copy", map[string]any{"bytes": 1 << 30, "gb_s": 4300, "one_way_gb_s": 2150})
		for _, ty := range []string{"q4_K", "bf16", "f16"} {
			for _, n := range []int{1, 8} {
				record(t, "matvec", map[string]any{"type": ty, "n": n, "cols": 14592, "rows": 65536, "used_bytes": 140e6,
					"gb_s": 3000 + 100*n, "pct_of_copy": 70})
			}
		}
	})
}

func TestMegakernelGoldens(t *testing.T) {
	if action(t.Name()) == "stall" {
		record(t, "megakernel_stall", map[string]any{"fixture": "tiny-llama-f32",
			"error": "megakernel: block 17 gave up at item 3, part 0 of instruction 42 (blk.0.attn): it waited for instruction 41 (blk.0.kv_store), whose counter stayed at 5, short of 6"})
		t.Fatalf("tiny-llama-f32: megakernel: block 17 gave up")
	}
	act(t, func() {
		record(t, "goldens_megakernel", map[string]any{"fixtures": 38, "match": 38})
	})
}

func TestGoldensSplit(t *testing.T) {
	for _, layout := range []string{"cuda:0,cuda:0", "cuda:0,cpu"} {
		t.Run(layout, func(t *testing.T) {
			act(t, func() {
				record(t, "goldens_split", map[string]any{"fixtures": 38, "match": 37, "layout": layout, "unsupported": []string{"tiny"}})
				record(t, "handoff", map[string]any{"layout": layout, "handoffs": 700, "us_per_handoff": 35.5, "bytes_per_handoff": 4096,
					"gb_s": 0.12})
			})
		})
	}
}

func TestConformanceRealSizes(t *testing.T) {
	act(t, func() {
		record(t, "conformance_real", map[string]any{"kernels": 40, "launches": 90, "failed": 0})
	})
}

func TestJIT(t *testing.T) {
	act(t, func() {
		record(t, "module_jit", map[string]any{"module": "megakernel", "code": "PTX", "load_ms": 21000, "jit_ms": 20900})
		record(t, "cubin_vs_ptx", map[string]any{"kernels": 40, "differ": nil, "cubin_modules": 13})
	})
}

func TestMegakernelGivesUp(t *testing.T) {
	act(t, func() {
		if os.Getenv("VERITY_MEGAKERNEL_STALL") != "1" {
			t.Skip("set VERITY_MEGAKERNEL_STALL=1 to run it")
		}
	})
}

func TestFaultIsSticky(t *testing.T) {
	act(t, func() {
		record(t, "fault", map[string]any{"code": "CUDA_ERROR_ILLEGAL_ADDRESS"})
	})
}
