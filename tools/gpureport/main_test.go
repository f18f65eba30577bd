package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A run with tests and records gives a report with every section and a table showing them.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "probe.txt", "== host: Linux\n")
	write(t, dir, "cuda.json", `{"Action":"run","Test":"TestBandwidth"}
{"Action":"output","Test":"TestBandwidth","Output":"ok\n"}
{"Action":"pass","Test":"TestBandwidth/q4_K","Elapsed":0.5}
{"Action":"pass","Test":"TestBandwidth","Elapsed":1.5}
{"Action":"output","Test":"TestGoldens","Output":"    goldens_test.go:1: prefill differs\n"}
{"Action":"fail","Test":"TestGoldens","Elapsed":2}
{"Action":"skip","Test":"TestGraphMatchesEager","Elapsed":0}
{"Action":"fail","Package":"verity/device/cuda","Elapsed":4}
`)
	write(t, dir, "results.jsonl", `{"kind":"device","test":"TestInfo","data":{"name":"NVIDIA H200","major":9,"minor":0,"sms":132,"total_mem":150000000000,"driver":13000,"peak_gb_s":4800}}
{"kind":"copy","test":"TestBandwidth","data":{"bytes":1073741824,"gb_s":4300,"one_way_gb_s":2150}}
{"kind":"matvec","test":"TestBandwidth/q4_K","data":{"type":"q4_K","n":1,"cols":14592,"rows":65536,"used_bytes":140000000,"gb_s":3900,"pct_of_copy":90.7}}
{"kind":"matvec","test":"TestBandwidth/q4_K","data":{"type":"q4_K","n":8,"cols":14592,"rows":65536,"used_bytes":140000000,"gb_s":3500,"pct_of_copy":81.4}}
{"kind":"matvec","test":"TestBandwidth/f32","data":{"type":"f32","n":1,"cols":1024,"rows":65536,"used_bytes":67108864,"error":"unsupported"}}
{"kind":"conformance","test":"TestConformance","data":{"kernels":40,"skipped":2,"launches":300,"failed":0,"bytes":123}}
{"kind":"goldens","test":"TestGoldens","data":{"fixtures":24,"match":23,"mismatch":["small-llama-f32"],"failed":null,"unsupported":null}}
not json
`)
	r := build(dir, 1, 12.5)
	if r.Passed != 1 || r.Failed != 1 || r.Skipped != 1 || len(r.Tests) != 4 || r.NoTests != "" {
		t.Errorf("counts %d/%d/%d, %d tests, no-tests %q", r.Passed, r.Failed, r.Skipped, len(r.Tests), r.NoTests)
	}
	if !strings.Contains(r.Tests[2].Output, "prefill differs") {
		t.Errorf("failed test output %q", r.Tests[2].Output)
	}
	if len(r.Records) != 7 || len(r.MatVec) != 3 || r.Copy == nil || r.Goldens == nil || r.Conformance == nil || r.Device == nil {
		t.Errorf("records not sorted into sections: %+v", r)
	}
	var buf bytes.Buffer
	table(&buf, r)
	out := buf.String()
	for _, want := range []string{"NVIDIA H200, sm_90, 132 SMs", "1 passed, 1 failed, 1 skipped; exit 1", "FAIL TestGoldens",
		"4300 GB/s", "q4_K    14592    140.0    3900 (91%)    3500 (81%)", "unsupported", "300 launches of 40 kernels",
		"23 of 24 fixtures match; 1 differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

// A test binary that died before its first test gives a report that says so, with the end of
// its log.
func TestReportNoTests(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "cuda.log", "Error in initialization, please refer to ... for details on: NoDevice\n")
	r := build(dir, 1, 0.1)
	if r.NoTests == "" || !strings.Contains(r.NoTests, "NoDevice") || !strings.Contains(r.NoTests, "status 1") {
		t.Errorf("no-tests explanation %q", r.NoTests)
	}
	var buf bytes.Buffer
	table(&buf, r)
	if !strings.Contains(buf.String(), "NO TESTS RAN") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// A test that started and never finished (the binary timed out) counts as failed, and the
// panic with the running tests is in the report and the table.
func TestReportIncomplete(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "cuda.json", `{"Action":"run","Test":"TestProbe"}
{"Action":"pass","Test":"TestProbe","Elapsed":0.1}
{"Action":"run","Test":"TestConformance"}
{"Action":"output","Test":"TestConformance","Output":"=== RUN   TestConformance/matvec_q4_K_q8_K\n"}
`)
	write(t, dir, "cuda.log", "=== RUN   TestConformance\npanic: test timed out after 170s\n\trunning tests:\n\t\tTestConformance (2m50s)\n\ngoroutine 7 [running]:\n")
	r := build(dir, 2, 171)
	if r.Passed != 1 || r.Failed != 1 || r.NoTests != "" {
		t.Errorf("passed %d, failed %d, no-tests %q", r.Passed, r.Failed, r.NoTests)
	}
	if last := r.Tests[len(r.Tests)-1]; last.Name != "TestConformance" || last.Result != "incomplete" || !strings.Contains(last.Output, "matvec_q4_K") {
		t.Errorf("last test %+v", last)
	}
	var buf bytes.Buffer
	table(&buf, r)
	for _, want := range []string{"DID NOT FINISH TestConformance", "BINARY DID NOT FINISH", "panic: test timed out", "TestConformance (2m50s)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
