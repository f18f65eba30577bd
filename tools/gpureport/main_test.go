package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A check with two test phases, a bench and the peer gives a report with every section, the
// ratios, the megakernel's status record in full, and a table showing them.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "probe.txt", "== host: Linux\n")
	write(t, dir, "phases.jsonl", `{"name":"smoke","kind":"test","status":"pass","exit":0,"wall_s":3.5,"limit_s":45}
{"name":"goldens","kind":"test","status":"fail","exit":1,"wall_s":20,"limit_s":60}
{"name":"bench-bf16-megakernel","kind":"bench","status":"pass","exit":0,"wall_s":30,"limit_s":45}
{"name":"bench-1b","kind":"bench","status":"killed","exit":124,"wall_s":75,"limit_s":75}
{"name":"real-sizes","kind":"test","status":"skipped","exit":0,"wall_s":0,"limit_s":0,"reason":"deadline: 20 s left"}
`)
	write(t, dir, "cuda.json", `{"Action":"run","Package":"smoke","Test":"TestInfo"}
{"Action":"pass","Package":"smoke","Test":"TestInfo","Elapsed":0.5}
{"Action":"run","Package":"goldens","Test":"TestGoldens"}
{"Action":"run","Package":"goldens","Test":"TestGoldens/small-llama-f32"}
{"Action":"output","Package":"goldens","Test":"TestGoldens/small-llama-f32","Output":"    goldens_test.go:1: [prefill] differ from the golden\n"}
{"Action":"fail","Package":"goldens","Test":"TestGoldens/small-llama-f32","Elapsed":2}
{"Action":"fail","Package":"goldens","Test":"TestGoldens","Elapsed":2}
`)
	write(t, dir, "smoke.log", "=== RUN   TestInfo\n--- PASS: TestInfo\n")
	write(t, dir, "goldens.log", "=== RUN   TestGoldens\n--- FAIL: TestGoldens\n")
	write(t, dir, "results.jsonl", `{"kind":"device","test":"TestInfo","data":{"name":"NVIDIA H200","major":9,"minor":0,"sms":132,"total_mem":150000000000,"driver":13000,"peak_gb_s":4800}}
{"kind":"copy","test":"TestBandwidth","data":{"bytes":1073741824,"gb_s":4300,"one_way_gb_s":2150}}
{"kind":"matvec","test":"TestBandwidth/bf16","data":{"type":"bf16","kernel":"matvec_bf16_bf16","n":1,"cols":4096,"rows":65536,"used_bytes":536870912,"gb_s":3900,"pct_of_copy":90.7}}
{"kind":"matvec","test":"TestBandwidth/bf16","data":{"type":"bf16","kernel":"matvec8_bf16_bf16","n":8,"cols":4096,"rows":65536,"used_bytes":536870912,"gb_s":3500,"pct_of_copy":81.4}}
{"kind":"matvec","test":"TestBandwidth/f32","data":{"type":"f32","n":1,"cols":1024,"rows":65536,"used_bytes":67108864,"error":"unsupported"}}
{"kind":"goldens","test":"TestGoldens","data":{"fixtures":24,"match":23,"mismatch":["small-llama-f32"],"failed":null,"unsupported":null}}
{"kind":"megakernel_stall","test":"TestMegakernelGoldens/tiny","data":{"block":17,"instr":42,"counter":3,"saw":5,"need":6}}
not json
`)
	write(t, dir, "bench-bf16-megakernel.json", `[{"model":"llama-1b-bf16","backend":"cuda:0","prompt_tokens":2048,"verify_ms_per_tree":0.925,"decode_tok_s":700,"decode_gb_s":3000,"bandwidth_fraction":0.7}]`)
	write(t, dir, "bench-1b.txt", "loading…\n")
	write(t, dir, "torchref.json", `{"ok":true,"torch":"2.11.0","device":"NVIDIA H200","verify":{"eager_us":9250,"graph_us":3200},
"gemv":[{"name":"output","dtype":"bf16","n":1,"gb_s":3600},{"name":"attn_q","dtype":"bf16","n":1,"gb_s":2100},{"name":"output","dtype":"bf16","n":8,"gb_s":3400}],
"read":{"gb_s":4400},"copy":{"gb_s":4200}}`)
	r := build(dir, 123.4, 540)
	if r.Passed != 1 || r.Failed != 1 || len(r.Tests) != 3 {
		t.Errorf("counts %d/%d, %d tests", r.Passed, r.Failed, len(r.Tests))
	}
	if p := r.Phases[1]; p.Failed != 1 || p.Passed != 0 || p.NoTests != "" {
		t.Errorf("goldens phase %+v", p)
	}
	if len(r.Records) != 7 || len(r.MatVec) != 3 || r.Copy == nil || r.Goldens == nil || r.Device == nil || len(r.Megakernel) != 1 {
		t.Errorf("records not sorted into sections: %d records, %d matvecs, %d megakernel", len(r.Records), len(r.MatVec), len(r.Megakernel))
	}
	if len(r.Benches) != 2 || len(r.Benches[0].Rows) != 1 || r.Benches[1].Error != "loading…" {
		t.Errorf("benches %+v", r.Benches)
	}
	want := map[string]float64{
		"8-node verify after 2048: torch eager vs Verity megakernel, llama-1b-bf16":      10,
		"8-node verify after 2048: torch CUDA graph vs Verity megakernel, llama-1b-bf16": 3200 / 925.0,
		"matvec bf16, 1 column(s): cuBLAS (best model shape) vs Verity":                  3900 / 3600.0,
		"matvec bf16, 8 column(s): cuBLAS (best model shape) vs Verity":                  3500 / 3400.0,
		"streaming read (torch.sum) vs Verity's fastest matvec":                          3900 / 4400.0,
		"device copy, read+write bytes: torch vs Verity":                                 4300 / 4200.0,
	}
	if len(r.Ratios) != len(want) {
		t.Errorf("%d ratios, want %d: %+v", len(r.Ratios), len(want), r.Ratios)
	}
	for _, q := range r.Ratios {
		if w, ok := want[q.What]; !ok || fmt.Sprintf("%.4f", w) != fmt.Sprintf("%.4f", q.Ratio) {
			t.Errorf("ratio %q = %v, want %v", q.What, q.Ratio, w)
		}
	}
	var buf bytes.Buffer
	table(&buf, r)
	out := buf.String()
	for _, s := range []string{"NVIDIA H200, sm_90, 132 SMs", "123.4 s of a 540 s deadline; tests: 1 passed, 1 failed",
		"smoke                    ok         3.5 s of  45  1 passed, 0 failed, 0 skipped",
		"goldens                  FAIL      20.0 s of  60", "bench-1b                 KILLED    75.0 s of  75  exit 124",
		"real-sizes               SKIPPED  deadline: 20 s left",
		"FAIL TestGoldens/small-llama-f32 [goldens]: goldens_test.go:1: [prefill] differ from the golden",
		`megakernel stall (TestMegakernelGoldens/tiny): {"block":17,"instr":42,"counter":3,"saw":5,"need":6}`,
		"4300 GB/s", "unsupported",
		"23 of 24 fixtures match; 1 differ, 0 failed, 0 unsupported (differ: small-llama-f32)",
		"bench-1b                 NO ROWS: loading…", "llama-1b-bf16            2048",
		"eager 9250 µs, CUDA graph 3200 µs", "bf16 n=1 3600 GB/s (output)",
		"verify, Verity megakernel, llama-1b-bf16: 925 µs → 10.00× torch eager, 3.46× torch CUDA graph"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	// each measured matvec beside the static model's prediction for its launch
	if !regexp.MustCompile(`bf16 +4096 +536\.9 +3900 \(91%\) \[\d+%\] +3500 \(81%\) \[\d+%\]`).MatchString(out) {
		t.Errorf("table lacks the bf16 row with predictions:\n%s", out)
	}
	if strings.Contains(out, "FAIL TestGoldens [") {
		t.Errorf("the table lists a parent that failed only through its subtest:\n%s", out)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

// A phase whose binary died before its first test says so with the end of its output.
func TestReportNoTests(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "phases.jsonl", `{"name":"smoke","kind":"test","status":"fail","exit":1,"wall_s":0.1,"limit_s":45}`+"\n")
	write(t, dir, "smoke.log", "Error in initialization, please refer to ... for details on: NoDevice\n")
	r := build(dir, 1, 0)
	if p := r.Phases[0]; !strings.Contains(p.NoTests, "NoDevice") || !strings.Contains(p.NoTests, "status 1") {
		t.Errorf("no-tests explanation %q", p.NoTests)
	}
	var buf bytes.Buffer
	table(&buf, r)
	if !strings.Contains(buf.String(), "DIED AT START (exit 1)") || !strings.Contains(buf.String(), "NoDevice") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// A test that started and never finished (the binary timed out) counts as failed, the phase
// is a timeout, and the panic with the running tests (not the goroutine dump) is shown.
func TestReportIncomplete(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "phases.jsonl", `{"name":"conformance","kind":"test","status":"fail","exit":2,"wall_s":61,"limit_s":60}`+"\n")
	write(t, dir, "cuda.json", `{"Action":"run","Package":"conformance","Test":"TestProbe"}
{"Action":"pass","Package":"conformance","Test":"TestProbe","Elapsed":0.1}
{"Action":"run","Package":"conformance","Test":"TestConformance"}
{"Action":"output","Package":"conformance","Test":"TestConformance","Output":"=== RUN   TestConformance/matvec_q4_K_q8_K\n"}
`)
	write(t, dir, "conformance.log", "=== RUN   TestConformance\npanic: test timed out after 60s\n\trunning tests:\n\t\tTestConformance (1m0s)\n\ngoroutine 7 [running]:\nmain.stuck()\n")
	r := build(dir, 70, 540)
	p := r.Phases[0]
	if p.Status != "timeout" || p.Passed != 1 || p.Failed != 1 || len(p.Unfinished) != 1 || strings.Contains(p.Crash, "goroutine") {
		t.Errorf("phase %+v", p)
	}
	var buf bytes.Buffer
	table(&buf, r)
	for _, want := range []string{"TIMEOUT", "did not finish: TestConformance", "DID NOT FINISH TestConformance [conformance]",
		"panic: test timed out", "TestConformance (1m0s)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// An empty directory (a runner killed before its first phase) still gives a report.
func TestReportEmpty(t *testing.T) {
	r := build(t.TempDir(), 0, 540)
	var buf bytes.Buffer
	table(&buf, r)
	if !strings.Contains(buf.String(), "NO PHASE RAN") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// The table of a check where everything failed at once stays short enough for the end of a
// call's output (12 000 characters) to hold it.
func TestReportTableIsShort(t *testing.T) {
	dir := t.TempDir()
	var phases, events strings.Builder
	for i := range 20 {
		fmt.Fprintf(&phases, `{"name":"phase%d","kind":"test","status":"fail","exit":1,"wall_s":1,"limit_s":60}`+"\n", i)
		for j := range 40 {
			fmt.Fprintf(&events, `{"Action":"output","Package":"phase%d","Test":"TestX%d","Output":"%s\n"}`+"\n", i, j, strings.Repeat("why ", 200))
			fmt.Fprintf(&events, `{"Action":"fail","Package":"phase%d","Test":"TestX%d"}`+"\n", i, j)
		}
		write(t, dir, fmt.Sprintf("phase%d.log", i), "=== RUN\npanic: "+strings.Repeat("boom ", 500)+"\n")
	}
	write(t, dir, "phases.jsonl", phases.String())
	write(t, dir, "cuda.json", events.String())
	var buf bytes.Buffer
	table(&buf, build(dir, 1, 540))
	if buf.Len() > 10000 {
		t.Errorf("table of %d bytes:\n%s", buf.Len(), buf.String())
	}
}
