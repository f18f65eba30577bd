// Command gpureport turns the output of a GPU check (tools/gpucheck.sh's runner) into
// report.json and a short table.
//
//	gpureport -dir OUT -exit STATUS -wall SECONDS
//
// It reads, from OUT: probe.txt (the host and driver probe), cuda.json (the test binary's
// test2json events), cuda.log (its plain output) and results.jsonl (the RESULT records the
// tests write: {"kind", "test", "data"}), any of which may be missing or empty. It writes
// OUT/report.json and prints the table on stdout. A test binary that died before its first
// test (no CUDA driver, no device) gives a report and a table that say so.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "the check's output directory")
	exit := flag.Int("exit", 0, "the test binary's exit status")
	wall := flag.Float64("wall", 0, "the test binary's wall time in seconds")
	flag.Parse()
	r := build(*dir, *exit, *wall)
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(*dir, "report.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpureport:", err)
		os.Exit(1)
	}
	table(os.Stdout, r)
}

// Report is report.json.
type Report struct {
	Generated string  `json:"generated"`
	Exit      int     `json:"exit"`
	WallS     float64 `json:"wall_s"`
	Probe     string  `json:"probe"`
	// NoTests explains a test binary that ran no test (the end of its log), else "".
	NoTests string `json:"no_tests,omitempty"`
	// Crash is the test binary's panic or fatal signal with the tests it was running, if its
	// log has one (a timeout, a crash); such tests are "incomplete" in Tests.
	Crash string `json:"crash,omitempty"`
	// Notes are problems reading the check's files.
	Notes   []string     `json:"notes,omitempty"`
	Passed  int          `json:"passed"` // top-level tests
	Failed  int          `json:"failed"`
	Skipped int          `json:"skipped"`
	Tests   []TestResult `json:"tests"` // every test and subtest, in order of completion

	Device          map[string]any   `json:"device,omitempty"`
	Copy            map[string]any   `json:"copy,omitempty"`
	MatVec          []map[string]any `json:"matvec,omitempty"`
	HostLink        map[string]any   `json:"host_link,omitempty"`
	Graph           map[string]any   `json:"graph,omitempty"`
	Conformance     map[string]any   `json:"conformance,omitempty"`
	ConformanceReal map[string]any   `json:"conformance_real,omitempty"`
	Goldens         map[string]any   `json:"goldens,omitempty"`
	GoldensMK       map[string]any   `json:"goldens_megakernel,omitempty"`
	Records         []Record         `json:"records"` // every RESULT record, as written
}

// TestResult is one test's outcome; Output holds the end of a failed test's output.
type TestResult struct {
	Name    string  `json:"name"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
	Output  string  `json:"output,omitempty"`
}

// Record is one line of results.jsonl.
type Record struct {
	Kind string          `json:"kind"`
	Test string          `json:"test"`
	Data json.RawMessage `json:"data"`
}

// event is a test2json event.
type event struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

const maxOutput = 4000 // bytes of a failed test's output kept

func build(dir string, exit int, wall float64) *Report {
	r := &Report{Generated: time.Now().UTC().Format(time.RFC3339), Exit: exit, WallS: wall, Tests: []TestResult{}, Records: []Record{}}
	if b, err := os.ReadFile(filepath.Join(dir, "probe.txt")); err == nil {
		r.Probe = string(b)
	}

	output := map[string]*bytes.Buffer{}
	var started []string       // tests in the order they started
	ended := map[string]bool{} // tests with a pass, fail or skip event
	r.note(eachLine(filepath.Join(dir, "cuda.json"), func(line []byte) {
		var e event
		if json.Unmarshal(line, &e) != nil || e.Test == "" {
			return
		}
		switch e.Action {
		case "run":
			started = append(started, e.Test)
		case "output":
			buf := output[e.Test]
			if buf == nil {
				buf = new(bytes.Buffer)
				output[e.Test] = buf
			}
			buf.WriteString(e.Output)
		case "pass", "fail", "skip":
			ended[e.Test] = true
			tr := TestResult{Name: e.Test, Result: e.Action, Seconds: e.Elapsed}
			if e.Action == "fail" && output[e.Test] != nil {
				tr.Output = tail(output[e.Test].String(), maxOutput)
			}
			r.Tests = append(r.Tests, tr)
			if !strings.Contains(e.Test, "/") {
				switch e.Action {
				case "pass":
					r.Passed++
				case "fail":
					r.Failed++
				default:
					r.Skipped++
				}
			}
		}
	}))
	// A test that started and never ended was running when the binary died (a timeout panic,
	// a crash, a kill): it counts as failed, with the end of its output.
	for _, name := range started {
		if ended[name] {
			continue
		}
		tr := TestResult{Name: name, Result: "incomplete"}
		if output[name] != nil {
			tr.Output = tail(output[name].String(), maxOutput)
		}
		r.Tests = append(r.Tests, tr)
		if !strings.Contains(name, "/") {
			r.Failed++
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "cuda.log"))
	r.Crash = crash(string(log))
	if len(started) == 0 {
		why := strings.TrimSpace(tail(string(log), 1500))
		if why == "" {
			why = "(no output)"
		}
		r.NoTests = fmt.Sprintf("the test binary exited with status %d before running any test; the end of its output:\n%s", exit, why)
	}

	r.note(eachLine(filepath.Join(dir, "results.jsonl"), func(line []byte) {
		var rec Record
		if json.Unmarshal(line, &rec) != nil {
			return
		}
		r.Records = append(r.Records, rec)
		var m map[string]any
		if json.Unmarshal(rec.Data, &m) != nil {
			return
		}
		switch rec.Kind {
		case "device":
			r.Device = m
		case "copy":
			r.Copy = m
		case "matvec":
			r.MatVec = append(r.MatVec, m)
		case "host_link":
			r.HostLink = m
		case "graph":
			r.Graph = m
		case "conformance":
			r.Conformance = m
		case "conformance_real":
			r.ConformanceReal = m
		case "goldens":
			r.Goldens = m
		case "goldens_megakernel":
			r.GoldensMK = m
		}
	}))
	return r
}

// eachLine calls f with every non-empty line of the file at path (none if it is missing) and
// reports a read error (a line over 16 MiB, say).
func eachLine(path string, f func([]byte)) error {
	file, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			f(line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

func (r *Report) note(err error) {
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
}

// crash returns the first panic or fatal error in a test log with the lines after it (which
// name the running tests and the failing goroutine), or "".
func crash(log string) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.HasPrefix(l, "SIGSEGV") ||
			strings.HasPrefix(l, "SIGABRT") || strings.HasPrefix(l, "signal: ") {
			return strings.TrimSpace(strings.Join(lines[i:min(len(lines), i+12)], "\n"))
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// num reads a number from a record (0 if absent).
func num(m map[string]any, key string) float64 {
	v, _ := m[key].(float64)
	return v
}

func str(m map[string]any, key string) string {
	v, _ := m[key].(string)
	return v
}

func count(m map[string]any, key string) int {
	v, _ := m[key].([]any)
	return len(v)
}

// table prints the summary: what ran, then each measurement that was recorded.
func table(w io.Writer, r *Report) {
	dev := "no device information"
	if r.Device != nil {
		dev = fmt.Sprintf("%s, sm_%d%d, %d SMs, %.0f GiB, driver %d", str(r.Device, "name"), int(num(r.Device, "major")),
			int(num(r.Device, "minor")), int(num(r.Device, "sms")), num(r.Device, "total_mem")/(1<<30), int(num(r.Device, "driver")))
	}
	fmt.Fprintf(w, "== GPU check: %s\n", dev)
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped; exit %d; %.1f s\n", r.Passed, r.Failed, r.Skipped, r.Exit, r.WallS)
	if r.NoTests != "" {
		fmt.Fprintf(w, "NO TESTS RAN: %s\n", r.NoTests)
		return
	}
	for _, t := range r.Tests {
		switch t.Result {
		case "fail":
			fmt.Fprintf(w, "  FAIL %s\n", t.Name)
		case "incomplete":
			fmt.Fprintf(w, "  DID NOT FINISH %s\n", t.Name)
		}
	}
	if r.Crash != "" {
		fmt.Fprintf(w, "BINARY DID NOT FINISH:\n%s\n", r.Crash)
	} else if r.Exit != 0 && r.Failed == 0 {
		fmt.Fprintf(w, "BINARY DID NOT FINISH (exit %d, no test failed)\n", r.Exit)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Copy != nil {
		fmt.Fprintf(w, "copy (device to device, %d MiB, read+write bytes): %.0f GB/s (%.0f GB/s one way)", int(num(r.Copy, "bytes"))>>20,
			num(r.Copy, "gb_s"), num(r.Copy, "one_way_gb_s"))
		if r.Device != nil && num(r.Device, "peak_gb_s") > 0 {
			fmt.Fprintf(w, "; datasheet peak %.0f GB/s", num(r.Device, "peak_gb_s"))
		}
		fmt.Fprintln(w)
	}
	if len(r.MatVec) > 0 {
		// one row per type, in the order measured; a column per activation count
		cells := map[string]map[int]string{}
		var types []string
		info := map[string][2]float64{}
		var rows float64
		for _, m := range r.MatVec {
			ty := str(m, "type")
			if cells[ty] == nil {
				cells[ty] = map[int]string{}
				types = append(types, ty)
				info[ty] = [2]float64{num(m, "cols"), num(m, "used_bytes")}
				rows = num(m, "rows")
			}
			c := fmt.Sprintf("%.0f (%.0f%%)", num(m, "gb_s"), num(m, "pct_of_copy"))
			if e := str(m, "error"); e != "" {
				c = e
			}
			cells[ty][int(num(m, "n"))] = c
		}
		fmt.Fprintf(w, "matvec (%.0f rows; GB/s = weight bytes read / kernel time; %% of the copy rate):\n", rows)
		fmt.Fprintf(w, "  %-6s %6s %8s %13s %13s\n", "type", "cols", "MB", "n=1", "n=8")
		for _, ty := range types {
			c := func(n int) string {
				if v, ok := cells[ty][n]; ok {
					return v
				}
				return "-"
			}
			fmt.Fprintf(w, "  %-6s %6.0f %8.1f %13s %13s\n", ty, info[ty][0], info[ty][1]/1e6, c(1), c(8))
		}
	}
	if r.HostLink != nil {
		fmt.Fprintf(w, "host link (1 GiB): write %.1f GB/s staged, %.1f direct; read %.1f staged, %.1f direct\n",
			num(r.HostLink, "write_staged_gb_s"), num(r.HostLink, "write_direct_gb_s"), num(r.HostLink, "read_staged_gb_s"), num(r.HostLink, "read_direct_gb_s"))
	}
	if r.Graph != nil {
		fmt.Fprintf(w, "graph: %d nodes; %.1f µs per sequence eager, %.1f µs as a graph\n", int(num(r.Graph, "nodes")),
			num(r.Graph, "eager_us_per_sequence"), num(r.Graph, "graph_us_per_sequence"))
	}
	for _, c := range []struct {
		name string
		m    map[string]any
	}{{"conformance (small shapes)", r.Conformance}, {"conformance (real sizes)", r.ConformanceReal}} {
		if c.m != nil {
			fmt.Fprintf(w, "%s: %d launches of %d kernels compared with the twin, %d failed; %d kernels unsupported\n", c.name,
				int(num(c.m, "launches")), int(num(c.m, "kernels")), int(num(c.m, "failed")), int(num(c.m, "skipped")))
		}
	}
	for _, g := range []struct {
		name string
		m    map[string]any
	}{{"goldens", r.Goldens}, {"goldens (megakernel)", r.GoldensMK}} {
		if g.m != nil {
			fmt.Fprintf(w, "%s: %d of %d fixtures match; %d differ, %d failed, %d unsupported\n", g.name, int(num(g.m, "match")),
				int(num(g.m, "fixtures")), count(g.m, "mismatch"), count(g.m, "failed"), count(g.m, "unsupported"))
		}
	}
}
