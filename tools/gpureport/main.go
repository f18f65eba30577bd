// Command gpureport turns the output of a GPU check (tools/gpurun.sh, which tools/gpucheck.sh
// installs as .gpu/run.sh) into report.json and the summary table.
//
//	gpureport -dir WORK [-wall SECONDS] [-deadline SECONDS]
//
// It reads, from WORK, whatever is there (any file may be missing, empty or cut short, as after
// a phase that hung or a runner that was killed):
//
//	phases.jsonl    one line per phase the runner ran or skipped: name, kind (test, bench, peer),
//	                status, exit, wall and limit seconds, why it was skipped
//	cuda.json       the test binary's test2json events, each phase's under its name (Package)
//	<phase>.log     each test phase's plain output: a panic (a test timeout) or a binary that
//	                died before its first test is read from it
//	results.jsonl   the tests' RESULT records ({"kind", "test", "data"})
//	fixtures.jsonl  the background fixture generation: one line per fixture
//	<bench>.json    each bench's rows (verity bench --json-out)
//	torchref.json   the PyTorch peer's figures (tools/torchref.py)
//	probe.txt       the host and driver probe
//	notes.txt       the runner's own notes (that a signal stopped it, say)
//
// It writes WORK/report.json and prints the table on stdout: per phase what happened, the
// failed and unfinished tests, then every measurement, the benches, and PyTorch's figures
// beside Verity's as ratios; each matvec rate beside the static performance model's prediction
// for the same launch (device/perf). The table stays under about 10 000 characters, so that
// the end of a call's output holds it whole.
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
	"sort"
	"strings"
	"time"

	"verity/device"
	"verity/device/kernels"
	"verity/device/perf"
)

func main() {
	dir := flag.String("dir", ".", "the check's work directory")
	wall := flag.Float64("wall", 0, "seconds since the runner started")
	deadline := flag.Float64("deadline", 0, "the runner's deadline in seconds (0: none given)")
	flag.Parse()
	r := build(*dir, *wall, *deadline)
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		tmp := filepath.Join(*dir, ".report.json.tmp")
		if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
			err = os.Rename(tmp, filepath.Join(*dir, "report.json"))
		}
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
	WallS     float64 `json:"wall_s"`
	DeadlineS float64 `json:"deadline_s,omitempty"`
	Probe     string  `json:"probe"`
	Phases    []Phase `json:"phases"`
	// Notes are problems reading the check's files.
	Notes   []string     `json:"notes,omitempty"`
	Passed  int          `json:"passed"` // top-level tests, every phase
	Failed  int          `json:"failed"`
	Skipped int          `json:"skipped"`
	Tests   []TestResult `json:"tests"` // every test and subtest, in order of completion

	Device          map[string]any   `json:"device,omitempty"`
	Modules         []map[string]any `json:"modules,omitempty"`
	ModulesJIT      []map[string]any `json:"modules_jit,omitempty"`
	CubinVsPTX      map[string]any   `json:"cubin_vs_ptx,omitempty"`
	Copy            map[string]any   `json:"copy,omitempty"`
	MatVec          []map[string]any `json:"matvec,omitempty"`
	HostLink        map[string]any   `json:"host_link,omitempty"`
	Graph           map[string]any   `json:"graph,omitempty"`
	Conformance     map[string]any   `json:"conformance,omitempty"`
	ConformanceReal map[string]any   `json:"conformance_real,omitempty"`
	Goldens         map[string]any   `json:"goldens,omitempty"`
	GoldensMK       map[string]any   `json:"goldens_megakernel,omitempty"`
	GoldensSplit    []map[string]any `json:"goldens_split,omitempty"`
	Handoffs        []map[string]any `json:"handoffs,omitempty"`
	Fault           map[string]any   `json:"fault,omitempty"`
	// Megakernel are the records the megakernel's tests write about a stuck or trapped launch
	// (kind "megakernel_…": its status word — which block, which instruction, which counter it
	// waited for and the value it saw — as the test decodes it), printed whole in the table.
	Megakernel []Record         `json:"megakernel,omitempty"`
	Fixtures   []map[string]any `json:"fixtures,omitempty"`
	Benches    []Bench          `json:"benches,omitempty"`
	Peer       map[string]any   `json:"peer,omitempty"`
	Ratios     []Ratio          `json:"ratios,omitempty"`
	Records    []Record         `json:"records"` // every RESULT record, as written
}

// Phase is one process the runner ran (or skipped).
type Phase struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"`   // test, bench, peer
	Status  string  `json:"status"` // pass, fail, timeout, killed, unavailable, skipped
	Exit    int     `json:"exit"`
	WallS   float64 `json:"wall_s"`
	LimitS  float64 `json:"limit_s"`
	StartS  float64 `json:"started_s"`
	Reason  string  `json:"reason,omitempty"`
	Passed  int     `json:"passed"`
	Failed  int     `json:"failed"`
	Skipped int     `json:"skipped"`
	// Unfinished are the tests that started and never ended (the phase timed out or died).
	Unfinished []string `json:"unfinished,omitempty"`
	// Crash is the binary's panic or fatal signal with the lines after it (the running tests).
	Crash string `json:"crash,omitempty"`
	// NoTests explains a test binary that ran no test: the end of its output.
	NoTests string `json:"no_tests,omitempty"`
	// Lost is the device fault that stopped the phase, if one did.
	Lost string `json:"lost,omitempty"`
}

// TestResult is one test's outcome; Output holds the end of a failed test's output.
type TestResult struct {
	Phase   string  `json:"phase"`
	Name    string  `json:"name"`
	Result  string  `json:"result"` // pass, fail, skip, incomplete
	Seconds float64 `json:"seconds"`
	Output  string  `json:"output,omitempty"`
}

// Record is one line of results.jsonl.
type Record struct {
	Kind string          `json:"kind"`
	Test string          `json:"test"`
	Data json.RawMessage `json:"data"`
}

// Bench is one verity bench run: its rows as --json-out wrote them.
type Bench struct {
	Name  string           `json:"name"`
	Rows  []map[string]any `json:"rows"`
	Error string           `json:"error,omitempty"`
}

// Ratio is one of PyTorch's figures beside the matching Verity figure.
type Ratio struct {
	What   string  `json:"what"`
	Torch  float64 `json:"torch"`
	Verity float64 `json:"verity"`
	Unit   string  `json:"unit"`
	// Ratio is Verity's advantage: torch/verity for times, verity/torch for rates.
	Ratio float64 `json:"ratio"`
}

// event is a test2json event.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

const maxOutput = 3000 // bytes of a failed test's output kept

func build(dir string, wall, deadline float64) *Report {
	r := &Report{Generated: time.Now().UTC().Format(time.RFC3339), WallS: wall, DeadlineS: deadline,
		Tests: []TestResult{}, Records: []Record{}, Phases: []Phase{}}
	if b, err := os.ReadFile(filepath.Join(dir, "probe.txt")); err == nil {
		r.Probe = string(b)
	}
	r.note(eachLine(filepath.Join(dir, "notes.txt"), func(line []byte) { r.Notes = append(r.Notes, string(line)) }))
	r.note(eachLine(filepath.Join(dir, "phases.jsonl"), func(line []byte) {
		var p Phase
		if json.Unmarshal(line, &p) == nil && p.Name != "" {
			r.Phases = append(r.Phases, p)
		}
	}))
	phase := map[string]*Phase{}
	for i := range r.Phases {
		phase[r.Phases[i].Name] = &r.Phases[i]
	}
	r.readEvents(dir, phase)
	for i := range r.Phases {
		p := &r.Phases[i]
		if p.Kind != "test" || p.Status == "skipped" {
			continue
		}
		log, _ := os.ReadFile(filepath.Join(dir, p.Name+".log"))
		p.Crash = crash(string(log))
		if !bytes.Contains(log, []byte("=== RUN")) {
			why := strings.TrimSpace(tail(string(log), 1200))
			if why == "" {
				why = "(no output)"
			}
			p.NoTests = fmt.Sprintf("the test binary exited with status %d before running any test; the end of its output:\n%s", p.Exit, why)
		}
		if p.Status == "fail" && p.Crash != "" && strings.HasPrefix(p.Crash, "panic: test timed out") {
			p.Status = "timeout"
		}
	}
	r.readRecords(dir, phase)
	r.note(eachLine(filepath.Join(dir, "fixtures.jsonl"), func(line []byte) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			r.Fixtures = append(r.Fixtures, m)
		}
	}))
	for _, p := range r.Phases {
		if p.Kind != "bench" || p.Status == "skipped" {
			continue
		}
		bn := Bench{Name: p.Name}
		b, err := os.ReadFile(filepath.Join(dir, p.Name+".json"))
		if err == nil {
			err = json.Unmarshal(b, &bn.Rows)
		}
		if err != nil {
			out, _ := os.ReadFile(filepath.Join(dir, p.Name+".txt"))
			bn.Error = strings.TrimSpace(tail(string(out), 600))
			if bn.Error == "" {
				bn.Error = "no rows and no output"
			}
		}
		r.Benches = append(r.Benches, bn)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "torchref.json")); err == nil {
		if err := json.Unmarshal(b, &r.Peer); err != nil {
			r.Notes = append(r.Notes, "torchref.json: "+err.Error())
		}
	}
	r.ratios()
	return r
}

// readEvents sorts the test2json events into tests, each phase's counts and unfinished tests.
func (r *Report) readEvents(dir string, phase map[string]*Phase) {
	type key struct{ pkg, test string }
	output := map[key]*bytes.Buffer{}
	var started []key
	ended := map[key]bool{}
	r.note(eachLine(filepath.Join(dir, "cuda.json"), func(line []byte) {
		var e event
		if json.Unmarshal(line, &e) != nil || e.Test == "" {
			return
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "run":
			started = append(started, k)
		case "output":
			buf := output[k]
			if buf == nil {
				buf = new(bytes.Buffer)
				output[k] = buf
			}
			if buf.Len() < 1<<20 {
				buf.WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			ended[k] = true
			tr := TestResult{Phase: e.Package, Name: e.Test, Result: e.Action, Seconds: e.Elapsed}
			if e.Action == "fail" && output[k] != nil {
				tr.Output = tail(output[k].String(), maxOutput)
			}
			r.Tests = append(r.Tests, tr)
			if !strings.Contains(e.Test, "/") {
				r.count(phase[e.Package], e.Action)
			}
		}
	}))
	// A test that started and never ended was running when its binary died (a timeout, a
	// crash, a kill): it counts as failed, with the end of its output.
	for _, k := range started {
		if ended[k] {
			continue
		}
		tr := TestResult{Phase: k.pkg, Name: k.test, Result: "incomplete"}
		if output[k] != nil {
			tr.Output = tail(output[k].String(), maxOutput)
		}
		r.Tests = append(r.Tests, tr)
		if p := phase[k.pkg]; p != nil {
			p.Unfinished = append(p.Unfinished, k.test)
		}
		if !strings.Contains(k.test, "/") {
			r.count(phase[k.pkg], "fail")
		}
	}
}

func (r *Report) count(p *Phase, action string) {
	switch action {
	case "pass":
		r.Passed++
	case "fail":
		r.Failed++
	default:
		r.Skipped++
	}
	if p == nil {
		return
	}
	switch action {
	case "pass":
		p.Passed++
	case "fail":
		p.Failed++
	default:
		p.Skipped++
	}
}

// readRecords sorts the RESULT records into the report's sections.
func (r *Report) readRecords(dir string, phase map[string]*Phase) {
	r.note(eachLine(filepath.Join(dir, "results.jsonl"), func(line []byte) {
		var rec Record
		if json.Unmarshal(line, &rec) != nil {
			return
		}
		r.Records = append(r.Records, rec)
		if strings.HasPrefix(rec.Kind, "megakernel_") {
			r.Megakernel = append(r.Megakernel, rec)
			return
		}
		var m map[string]any
		if json.Unmarshal(rec.Data, &m) != nil {
			return
		}
		switch rec.Kind {
		case "device":
			r.Device = m
		case "module":
			r.Modules = append(r.Modules, m)
		case "module_jit":
			r.ModulesJIT = append(r.ModulesJIT, m)
		case "cubin_vs_ptx":
			r.CubinVsPTX = m
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
		case "goldens_split":
			r.GoldensSplit = append(r.GoldensSplit, m)
		case "handoff":
			r.Handoffs = append(r.Handoffs, m)
		case "fault":
			r.Fault = m
		}
		if lost := str(m, "lost"); lost != "" {
			if p := phase[map[string]string{"conformance": "conformance", "conformance_real": "real-sizes"}[rec.Kind]]; p != nil {
				p.Lost = lost + ": " + str(m, "lost_error")
			}
		}
	}))
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
			end := min(len(lines), i+10)
			for j := i + 1; j < end; j++ { // the running tests, not the goroutine dump
				if strings.HasPrefix(lines[j], "goroutine ") {
					end = j
				}
			}
			return strings.TrimSpace(strings.Join(lines[i:end], "\n"))
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

// benchRow returns the first row of the named bench whose backend runs (or not) through the
// megakernel, or nil.
func (r *Report) benchRow(name string) map[string]any {
	for _, b := range r.Benches {
		if b.Name == name && len(b.Rows) > 0 {
			return b.Rows[0]
		}
	}
	return nil
}

// ratios pairs PyTorch's figures with Verity's measured in the same call.
func (r *Report) ratios() {
	if r.Peer == nil {
		return
	}
	ver, _ := r.Peer["verify"].(map[string]any)
	for _, t := range []struct{ key, what string }{{"eager_us", "eager"}, {"graph_us", "CUDA graph"}} {
		tv := num(ver, t.key)
		if tv <= 0 {
			continue
		}
		for _, v := range []struct{ bench, what string }{
			{"bench-bf16", "Verity eager, llama-1b-bf16"}, {"bench-bf16-megakernel", "Verity megakernel, llama-1b-bf16"},
			{"bench-target", "Verity eager, llama-1b-q4_k_m"}, {"bench-target-megakernel", "Verity megakernel, llama-1b-q4_k_m"},
			{"seed001", "Verity eager, seed001 protocol"}, {"seed001-megakernel", "Verity megakernel, seed001 protocol"},
		} {
			row := r.benchRow(v.bench)
			ms := num(row, "verify_ms_per_tree")
			if us := num(row, "us_per_call"); us > 0 { // the seed's protocol: µs per call
				ms = us / 1000
			}
			if row == nil || ms <= 0 {
				continue
			}
			r.Ratios = append(r.Ratios, Ratio{What: "8-node verify after 2048: torch " + t.what + " vs " + v.what,
				Torch: tv, Verity: 1000 * ms, Unit: "µs", Ratio: tv / (1000 * ms)})
		}
	}
	// GEMV: torch's best rate per dtype and column count against Verity's matvec of that type
	best := map[string]float64{}
	for _, g := range anySlice(r.Peer["gemv"]) {
		k := fmt.Sprintf("%s/%d", str(g, "dtype"), int(num(g, "n")))
		best[k] = max(best[k], num(g, "gb_s"))
	}
	for _, m := range r.MatVec {
		ty := map[string]string{"bf16": "bf16", "f16": "fp16"}[str(m, "type")]
		k := fmt.Sprintf("%s/%d", ty, int(num(m, "n")))
		if ty == "" || best[k] <= 0 || num(m, "gb_s") <= 0 {
			continue
		}
		r.Ratios = append(r.Ratios, Ratio{What: fmt.Sprintf("matvec %s, %d column(s): cuBLAS (best model shape) vs Verity", ty, int(num(m, "n"))),
			Torch: best[k], Verity: num(m, "gb_s"), Unit: "GB/s", Ratio: num(m, "gb_s") / best[k]})
	}
	if rd, _ := r.Peer["read"].(map[string]any); num(rd, "gb_s") > 0 {
		top := 0.0
		for _, m := range r.MatVec {
			top = max(top, num(m, "gb_s"))
		}
		if top > 0 {
			r.Ratios = append(r.Ratios, Ratio{What: "streaming read (torch.sum) vs Verity's fastest matvec", Torch: num(rd, "gb_s"),
				Verity: top, Unit: "GB/s", Ratio: top / num(rd, "gb_s")})
		}
	}
	if cp, _ := r.Peer["copy"].(map[string]any); num(cp, "gb_s") > 0 && r.Copy != nil && num(r.Copy, "gb_s") > 0 {
		r.Ratios = append(r.Ratios, Ratio{What: "device copy, read+write bytes: torch vs Verity", Torch: num(cp, "gb_s"),
			Verity: num(r.Copy, "gb_s"), Unit: "GB/s", Ratio: num(r.Copy, "gb_s") / num(cp, "gb_s")})
	}
}

func anySlice(v any) []map[string]any {
	var out []map[string]any
	if s, ok := v.([]any); ok {
		for _, x := range s {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// maxTable is the most the table should print: the end of a device call's output holds 12 000
// characters.
const maxTable = 10000

// detail is how much of each failure the table shows.
type detail struct {
	crash    int // characters of a phase's crash or dead binary's output
	failures int // failed tests listed
	line     int // characters of each one's last line
}

// details are tried in turn until the table fits maxTable.
var details = []detail{{600, 25, 240}, {300, 15, 160}, {160, 8, 120}, {0, 4, 80}}

// table prints the summary: the phases, what failed, then each measurement that was recorded,
// with as much detail of the failures as fits maxTable.
func table(w io.Writer, r *Report) {
	var buf bytes.Buffer
	for _, d := range details {
		buf.Reset()
		render(&buf, r, d)
		if buf.Len() <= maxTable {
			break
		}
	}
	w.Write(buf.Bytes())
}

func render(w io.Writer, r *Report, d detail) {
	dev := "no device information"
	if r.Device != nil {
		dev = fmt.Sprintf("%s, sm_%d%d, %d SMs, %.0f GiB, driver %d", str(r.Device, "name"), int(num(r.Device, "major")),
			int(num(r.Device, "minor")), int(num(r.Device, "sms")), num(r.Device, "total_mem")/(1<<30), int(num(r.Device, "driver")))
	}
	fmt.Fprintf(w, "== GPU check: %s\n", dev)
	fmt.Fprintf(w, "%.1f s", r.WallS)
	if r.DeadlineS > 0 {
		fmt.Fprintf(w, " of a %.0f s deadline", r.DeadlineS)
	}
	fmt.Fprintf(w, "; tests: %d passed, %d failed, %d skipped\n", r.Passed, r.Failed, r.Skipped)
	phases(w, r, d)
	failures(w, r, d)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	modules(w, r)
	measurements(w, r)
	benches(w, r)
	peer(w, r)
	if len(r.Fixtures) > 0 {
		var parts []string
		for _, f := range r.Fixtures {
			s := fmt.Sprintf("%s %.0f s", str(f, "fixture"), num(f, "seconds"))
			if num(f, "exit") != 0 {
				s += fmt.Sprintf(" (FAILED, exit %d)", int(num(f, "exit")))
			}
			parts = append(parts, s)
		}
		fmt.Fprintf(w, "fixtures generated: %s\n", strings.Join(parts, ", "))
	}
}

func phases(w io.Writer, r *Report, d detail) {
	if len(r.Phases) == 0 {
		fmt.Fprintln(w, "NO PHASE RAN")
		return
	}
	fmt.Fprintln(w, "phases:")
	for _, p := range r.Phases {
		if p.Status == "skipped" {
			fmt.Fprintf(w, "  %-24s SKIPPED  %s\n", p.Name, p.Reason)
			continue
		}
		st := strings.ToUpper(p.Status)
		if p.Status == "pass" {
			st = "ok"
		}
		line := fmt.Sprintf("  %-24s %-8s %5.1f s of %3.0f", p.Name, st, p.WallS, p.LimitS)
		switch {
		case p.Kind == "test" && p.NoTests != "":
			line += fmt.Sprintf("  DIED AT START (exit %d)", p.Exit)
		case p.Kind == "test":
			line += fmt.Sprintf("  %d passed, %d failed, %d skipped", p.Passed, p.Failed, p.Skipped)
		case p.Exit != 0:
			line += fmt.Sprintf("  exit %d", p.Exit)
		}
		if len(p.Unfinished) > 0 {
			line += "; did not finish: " + strings.Join(p.Unfinished, ", ")
		}
		fmt.Fprintln(w, line)
		if p.Lost != "" {
			fmt.Fprintf(w, "    DEVICE LOST at %s\n", oneLine(p.Lost, 300))
		}
		if d.crash == 0 {
			continue
		}
		if p.NoTests != "" {
			fmt.Fprintf(w, "    %s\n", indent(clip(p.NoTests, d.crash)))
		} else if p.Crash != "" {
			fmt.Fprintf(w, "    %s\n", indent(clip(p.Crash, d.crash)))
		}
	}
}

// failures lists the failed and unfinished tests (leaves only, as many as d says) with the
// last line of each one's output.
func failures(w io.Writer, r *Report, d detail) {
	parents := map[string]bool{}
	for _, t := range r.Tests {
		if i := strings.LastIndex(t.Name, "/"); i > 0 {
			parents[t.Phase+" "+t.Name[:i]] = true
		}
	}
	shown, more := 0, 0
	for _, t := range r.Tests {
		if t.Result != "fail" && t.Result != "incomplete" {
			continue
		}
		if parents[t.Phase+" "+t.Name] && t.Result == "fail" {
			continue // a parent that failed because a subtest did
		}
		if shown == d.failures {
			more++
			continue
		}
		shown++
		label := "FAIL"
		if t.Result == "incomplete" {
			label = "DID NOT FINISH"
		}
		fmt.Fprintf(w, "  %s %s [%s]", label, t.Name, t.Phase)
		if last := lastLine(t.Output); last != "" {
			fmt.Fprintf(w, ": %s", oneLine(last, d.line))
		}
		fmt.Fprintln(w)
	}
	if more > 0 {
		fmt.Fprintf(w, "  … and %d more (report.json)\n", more)
	}
	for _, rec := range r.Megakernel {
		fmt.Fprintf(w, "megakernel %s (%s): %s\n", strings.TrimPrefix(rec.Kind, "megakernel_"), rec.Test, oneLine(string(rec.Data), 600))
	}
}

// lastLine is the last line of a test's output that says something (not a --- line).
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "=== ") && l != "FAIL" && !strings.HasPrefix(l, "RESULT ") {
			return l
		}
	}
	return ""
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// clip keeps the first n characters of s (the head of a crash names the panic and the running
// tests; the head of a dead binary's output, its last lines, is kept by tail before).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") }

func modules(w io.Writer, r *Report) {
	if len(r.Modules) > 0 {
		codes := map[string]int{}
		var total, worst float64
		var worstName, mk string
		var errs []string
		for _, m := range r.Modules {
			codes[str(m, "code")]++
			total += num(m, "load_ms")
			if num(m, "load_ms") > worst {
				worst, worstName = num(m, "load_ms"), str(m, "module")
			}
			if e := str(m, "error"); e != "" {
				errs = append(errs, str(m, "module")+": "+oneLine(e, 160))
			}
			if str(m, "module") == "megakernel" {
				if ks, ok := m["kernels"].(map[string]any); ok {
					if a, ok := ks["megakernel"].(map[string]any); ok {
						mk = fmt.Sprintf("; megakernel: %d registers, %d B static shared, %d B local, up to %d threads, sm_%d code",
							int(num(a, "registers")), int(num(a, "static_shared")), int(num(a, "local")), int(num(a, "max_threads")),
							int(num(a, "binary_version")))
					}
				}
			}
		}
		var cs []string
		for c, n := range codes {
			cs = append(cs, fmt.Sprintf("%d %s", n, c))
		}
		sort.Strings(cs)
		fmt.Fprintf(w, "modules: %s; loads %.0f ms in all, slowest %s %.1f ms%s\n", strings.Join(cs, ", "), total, worstName, worst, mk)
		for _, m := range r.Modules {
			if why := str(m, "why"); why != "" && str(m, "code") == "PTX" {
				fmt.Fprintf(w, "  %s from PTX (%s): JIT %.0f ms\n", str(m, "module"), oneLine(why, 160), num(m, "jit_ms"))
			}
		}
		for _, e := range errs {
			fmt.Fprintf(w, "  LOAD FAILED %s\n", e)
		}
	}
	if len(r.ModulesJIT) > 0 {
		var total float64
		var parts []string
		for _, m := range r.ModulesJIT {
			total += num(m, "load_ms")
			if num(m, "load_ms") >= 1000 || str(m, "error") != "" {
				p := fmt.Sprintf("%s %.1f s", str(m, "module"), num(m, "load_ms")/1000)
				if str(m, "error") != "" {
					p = str(m, "module") + " FAILED: " + oneLine(str(m, "error"), 200)
				}
				parts = append(parts, p)
			}
		}
		fmt.Fprintf(w, "JIT of the PTX (no compute cache): %d modules in %.1f s", len(r.ModulesJIT), total/1000)
		if len(parts) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
	}
	if c := r.CubinVsPTX; c != nil {
		fmt.Fprintf(w, "cubins vs JIT-compiled PTX: %d kernels compared, %d differ (%d modules from cubins)\n", int(num(c, "kernels")),
			count(c, "differ"), int(num(c, "cubin_modules")))
	}
}

func measurements(w io.Writer, r *Report) {
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
			if pct, ok := predictedMatVec(r.Device, m); ok {
				c += fmt.Sprintf(" [%.0f%%]", pct)
			}
			if e := str(m, "error"); e != "" {
				c = e
			}
			cells[ty][int(num(m, "n"))] = c
		}
		fmt.Fprintf(w, "matvec (%.0f rows; GB/s = weight bytes read / kernel time; %% of the copy rate; [the static model's prediction, %% of its floor on %s]):\n",
			rows, modelCard(r.Device).Name)
		fmt.Fprintf(w, "  %-6s %6s %8s %19s %19s\n", "type", "cols", "MB", "n=1", "n=8")
		for _, ty := range types {
			c := func(n int) string {
				if v, ok := cells[ty][n]; ok {
					return v
				}
				return "-"
			}
			fmt.Fprintf(w, "  %-6s %6.0f %8.1f %19s %19s\n", ty, info[ty][0], info[ty][1]/1e6, c(1), c(8))
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
			fmt.Fprintf(w, "%s: %d launches of %d kernels compared with the twin, %d failed; %d kernels unsupported", c.name,
				int(num(c.m, "launches")), int(num(c.m, "kernels")), int(num(c.m, "failed")), int(num(c.m, "skipped")))
			if l := str(c.m, "lost"); l != "" {
				fmt.Fprintf(w, "; STOPPED at %s (device lost), %d kernels not checked", l, int(num(c.m, "not_run")))
			}
			fmt.Fprintln(w)
		}
	}
	gs := []struct {
		name string
		m    map[string]any
	}{{"goldens", r.Goldens}, {"goldens (megakernel)", r.GoldensMK}}
	for _, m := range r.GoldensSplit {
		gs = append(gs, struct {
			name string
			m    map[string]any
		}{"goldens (split " + str(m, "layout") + ")", m})
	}
	for _, g := range gs {
		if g.m != nil {
			fmt.Fprintf(w, "%s: %d of %d fixtures match; %d differ, %d failed, %d unsupported", g.name, int(num(g.m, "match")),
				int(num(g.m, "fixtures")), count(g.m, "mismatch"), count(g.m, "failed"), count(g.m, "unsupported"))
			if d := anyStrings(g.m["mismatch"]); len(d) > 0 {
				fmt.Fprintf(w, " (differ: %s)", oneLine(strings.Join(d, ", "), 200))
			}
			fmt.Fprintln(w)
		}
	}
	for _, h := range r.Handoffs {
		fmt.Fprintf(w, "hand-off %s: %d between stages, %.1f µs each, %.0f bytes each (%.2f GB/s)\n", str(h, "layout"),
			int(num(h, "handoffs")), num(h, "us_per_handoff"), num(h, "bytes_per_handoff"), num(h, "gb_s"))
	}
	if r.Fault != nil {
		fmt.Fprintf(w, "fault test: %s, reported and sticky\n", str(r.Fault, "code"))
	}
}

func anyStrings(v any) []string {
	var out []string
	if s, ok := v.([]any); ok {
		for _, x := range s {
			if t, ok := x.(string); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

func benches(w io.Writer, r *Report) {
	if len(r.Benches) == 0 {
		return
	}
	fmt.Fprintln(w, "whole-model benches (verity bench --backend cuda; the tables and profiles in gpucheck.tar.gz):")
	fmt.Fprintf(w, "  %-24s %-22s %6s %9s %9s %10s %8s %6s\n", "bench", "model", "prompt", "prefill/s", "decode/s", "verify ms", "GB/s", "probe")
	for _, b := range r.Benches {
		if b.Error != "" {
			fmt.Fprintf(w, "  %-24s NO ROWS: %s\n", b.Name, oneLine(b.Error, 300))
			continue
		}
		for _, row := range b.Rows {
			if _, ok := row["us_per_call"]; ok { // verity bench --protocol seed001
				verdict := "PASS"
				if g, _ := row["graded"].(bool); !g || num(row, "decode_equal") != num(row, "decode_nodes") {
					verdict = "FAIL"
				}
				caught := "caught"
				if c, _ := row["wrong_caught"].(bool); !c {
					caught = "NOT all caught"
				}
				modelled := ""
				if m := num(row, "modelled_us"); m > 0 { // the megakernel's cost model of the same schedule
					modelled = fmt.Sprintf(" (modelled %.0f µs: measured/modelled %.2f)", m, num(row, "us_per_call")/m)
				}
				fmt.Fprintf(w, "  %-24s seed001 protocol: %.0f µs per call%s, %.0f verified positions/s, %.0f%% of the floor; error %.2e (gate %.1e), %d/%d nodes bit-identical to decoding — %s; wrong variants %s\n",
					b.Name, num(row, "us_per_call"), modelled, num(row, "verified_positions_per_s"), 100*num(row, "of_floor"), num(row, "max_error"),
					num(row, "tolerance"), int(num(row, "decode_equal")), int(num(row, "decode_nodes")), verdict, caught)
				continue
			}
			fmt.Fprintf(w, "  %-24s %-22s %6d %9.1f %9.1f %10.3f %8.1f %5.0f%%\n", b.Name, str(row, "model"), int(num(row, "prompt_tokens")),
				num(row, "prefill_tok_s"), num(row, "decode_tok_s"), num(row, "verify_ms_per_tree"), num(row, "decode_gb_s"),
				100*num(row, "bandwidth_fraction"))
			if sp, ok := row["spec"].(map[string]any); ok {
				fmt.Fprintf(w, "  %-24s   speculative: %.1f tok/s vs %.1f plain (%.2f×)\n", "", num(sp, "tok_s"), num(sp, "plain_tok_s"), num(sp, "speedup"))
			}
			var curve []string
			for _, p := range anySlice(row["verify_curve"]) {
				curve = append(curve, fmt.Sprintf("%d:%.2f", int(num(p, "nodes")), num(p, "ms")))
			}
			if len(curve) > 0 {
				fmt.Fprintf(w, "  %-24s   verify ms by nodes: %s\n", "", strings.Join(curve, " "))
			}
			ops := anySlice(row["ops"])
			sort.SliceStable(ops, func(i, j int) bool { return num(ops[i], "share") > num(ops[j], "share") })
			var top []string
			for i, o := range ops {
				if i == 4 {
					break
				}
				top = append(top, fmt.Sprintf("%s %.0f%% (%.0f GB/s)", str(o, "name"), 100*num(o, "share"), num(o, "gb_s")))
			}
			if len(top) > 0 {
				fmt.Fprintf(w, "  %-24s   decode ops: %s\n", "", strings.Join(top, ", "))
			}
		}
	}
}

func peer(w io.Writer, r *Report) {
	if r.Peer == nil {
		return
	}
	if ok, _ := r.Peer["ok"].(bool); !ok {
		fmt.Fprintf(w, "PyTorch peer: no figures: %s%s\n", str(r.Peer, "error"), oneLine(strings.Join(anyStrings(r.Peer["errors"]), "; "), 300))
		return
	}
	ver, _ := r.Peer["verify"].(map[string]any)
	fmt.Fprintf(w, "PyTorch peer (torch %s, %s, same call): 8-node verify after 2048: eager %.0f µs, CUDA graph %.0f µs (published: 9250, 3200; floor 531)\n",
		str(r.Peer, "torch"), str(r.Peer, "device"), num(ver, "eager_us"), num(ver, "graph_us"))
	best := map[string]map[string]any{}
	for _, g := range anySlice(r.Peer["gemv"]) {
		k := str(g, "dtype") + " n=" + fmt.Sprint(int(num(g, "n")))
		if best[k] == nil || num(g, "gb_s") > num(best[k], "gb_s") {
			best[k] = g
		}
	}
	var ks []string
	for k := range best {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %.0f GB/s (%s)", k, num(best[k], "gb_s"), str(best[k], "name")))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  cuBLAS GEMV, best model shape: %s\n", strings.Join(parts, "; "))
	}
	if rd, _ := r.Peer["read"].(map[string]any); rd != nil {
		fmt.Fprintf(w, "  streaming read %.0f GB/s", num(rd, "gb_s"))
		if cp, _ := r.Peer["copy"].(map[string]any); cp != nil {
			fmt.Fprintf(w, "; copy %.0f GB/s read+write", num(cp, "gb_s"))
		}
		fmt.Fprintln(w)
	}
	for _, s := range anyStrings(r.Peer["skipped"]) {
		fmt.Fprintf(w, "  skipped: %s\n", s)
	}
	for _, s := range anyStrings(r.Peer["errors"]) {
		fmt.Fprintf(w, "  error: %s\n", oneLine(s, 300))
	}
	// the verify: one line per Verity figure, against both of torch's
	byVerity := map[string][]Ratio{}
	var order []string
	for _, q := range r.Ratios {
		if v, ok := strings.CutPrefix(q.What, "8-node verify after 2048: torch "); ok {
			_, who, _ := strings.Cut(v, " vs ")
			if byVerity[who] == nil {
				order = append(order, who)
			}
			byVerity[who] = append(byVerity[who], q)
			continue
		}
		fmt.Fprintf(w, "  %s: %.0f vs %.0f %s → Verity %.2f×\n", q.What, q.Torch, q.Verity, q.Unit, q.Ratio)
	}
	for _, who := range order {
		qs := byVerity[who]
		var parts []string
		for _, q := range qs {
			what := strings.TrimSuffix(strings.TrimPrefix(q.What, "8-node verify after 2048: torch "), " vs "+who)
			parts = append(parts, fmt.Sprintf("%.2f× torch %s", q.Ratio, what))
		}
		fmt.Fprintf(w, "  verify, %s: %.0f µs → %s\n", who, qs[0].Verity, strings.Join(parts, ", "))
	}
}

// modelCard is the static model's card for the device the check ran on: by name, else by
// compute capability (9.x: the H200, 8.x: the A100).
func modelCard(dev map[string]any) perf.Card {
	name := str(dev, "name")
	for _, c := range []string{"H200", "H100", "A100"} {
		if strings.Contains(name, c) {
			return perf.Cards[c]
		}
	}
	if int(num(dev, "major")) == 8 {
		return perf.Cards["A100"]
	}
	return perf.Cards[perf.DefaultCard]
}

// predictedMatVec is the static model's percentage of the floor for a matvec record's launch
// (device/perf, from the committed facts): measured against predicted, to calibrate the model.
func predictedMatVec(dev map[string]any, m map[string]any) (float64, bool) {
	entry := str(m, "kernel")
	for _, k := range device.Kernels() {
		if k.Entry() != entry {
			continue
		}
		p, err := perf.Predict(modelCard(dev), k, kernels.MatVecArgs{W: 1 << 40, X: 2 << 40, Y: 3 << 40,
			Rows: int32(num(m, "rows")), Cols: int32(num(m, "cols")), N: int32(num(m, "n"))})
		return p.Pct, err == nil
	}
	return 0, false
}
