package main

// Dry runs of the GPU check: the real runner (tools/gpurun.sh) and this report, with stand-ins
// for the binaries that need a GPU — testdata/standin as the CUDA test binary, shell scripts
// as the CLI and as PyTorch — with every time limit divided by 15, so that what the runner
// does when the binary dies at start, when a phase hangs, faults or crashes, when the benches
// hang past the deadline and when the runner is killed has run before the first real call.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const divisor = "15" // VERITY_TIME_DIVISOR of the dry runs

// standinVerity is the CLI: `fixture NAME` makes a file in the cache, `bench` writes rows for
// its models (or hangs, or fails, as STANDIN_BENCH says; a megakernel bench as STANDIN_MK says).
const standinVerity = `#!/bin/sh
cmd=$1; shift
case $cmd in
fixture)
	[ "${STANDIN_GEN:-ok}" = fail ] && { echo "fixture $1: stand-in failure" >&2; exit 1; }
	mkdir -p "$VERITY_CACHE/fixtures" && echo x >"$VERITY_CACHE/fixtures/$1.gguf" && echo "$VERITY_CACHE/fixtures/$1.gguf" ;;
bench)
	json= models= mk=0 prompt=128 protocol=
	while [ $# -gt 0 ]; do
		case $1 in
		--json-out) json=$2; shift ;;
		--protocol) protocol=$2; shift ;;
		--model) models="$models $2"; shift ;;
		--prompt) prompt=$2; shift ;;
		--megakernel) mk=1 ;;
		esac
		shift
	done
	how=${STANDIN_BENCH:-pass}
	[ $mk = 1 ] && how=${STANDIN_MK:-$how}
	case $how in
	hang) sleep 3600 ;;
	fail) echo "bench: stand-in failure" >&2; exit 1 ;;
	esac
	sep= rows=
	[ -n "$protocol" ] && rows="{\"us_per_call\":640,\"verified_positions_per_s\":12500,\"of_floor\":0.93,\"max_error\":0.011,\"tolerance\":0.065,\"graded\":true,\"decode_nodes\":8,\"decode_equal\":8,\"wrong_caught\":true,\"megakernel\":$([ $mk = 1 ] && echo true || echo false)$([ $mk = 1 ] && echo ,\"modelled_us\":800)}"
	for m in $models; do
		ms=0.9; [ $mk = 1 ] && ms=0.7
		rows="$rows$sep{\"model\":\"$m\",\"backend\":\"cuda:0\",\"prompt_tokens\":$prompt,\"prefill_tok_s\":9000,\"decode_tok_s\":600,\"verify_ms_per_tree\":$ms,\"decode_gb_s\":2500,\"bandwidth_fraction\":0.58,\"verify_curve\":[{\"nodes\":1,\"ms\":0.5},{\"nodes\":8,\"ms\":$ms}],\"ops\":[{\"name\":\"matvec q4_K\",\"share\":0.7,\"gb_s\":3000},{\"name\":\"attention\",\"share\":0.2,\"gb_s\":900}]}"
		sep=,
	done
	echo "[$rows]" >"$json"
	echo "model backend verify"
	echo "stand-in table for$models" ;;
esac
`

// standinPython is PyTorch's peer: it writes torchref's JSON (or hangs, or has no torch, as
// STANDIN_PY says).
const standinPython = `#!/bin/sh
[ "$1" = --version ] && { echo "Python 3.12 (stand-in)"; exit 0; }
out=
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
case ${STANDIN_PY:-pass} in
hang) sleep 3600 ;;
none) echo '{"ok": false, "error": "no torch: stand-in"}' >"$out"; exit 3 ;;
esac
cat >"$out" <<'JSON'
{"ok": true, "torch": "2.11.0", "device": "NVIDIA H200",
 "verify": {"eager_us": 9100, "graph_us": 3150, "nodes": 8, "pos": 2048},
 "gemv": [{"name": "output", "dtype": "bf16", "n": 1, "gb_s": 3800}, {"name": "ffn_up", "dtype": "bf16", "n": 1, "gb_s": 3500},
          {"name": "output", "dtype": "fp16", "n": 8, "gb_s": 3700}],
 "read": {"gb_s": 4400}, "copy": {"gb_s": 4250}}
JSON
echo torchref stand-in done
`

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds gpureport, test2json and the stand-in test binary once for every dry run.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "gpucheck-dry")
		if buildErr != nil {
			return
		}
		for _, c := range [][]string{
			{"build", "-o", filepath.Join(binDir, "gpureport"), "."},
			{"build", "-o", filepath.Join(binDir, "test2json"), "cmd/test2json"},
			{"test", "-c", "-o", filepath.Join(binDir, "cuda.test"), "./testdata/standin"},
		} {
			out, err := exec.Command("go", c...).CombinedOutput()
			if err != nil {
				buildErr = &exec.Error{Name: "go " + strings.Join(c, " ") + ": " + string(out), Err: err}
				return
			}
		}
		for name, text := range map[string]string{"verity": standinVerity, "python": standinPython} {
			if buildErr = os.WriteFile(filepath.Join(binDir, name), []byte(text), 0o755); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// TestMain removes the dry runs' binaries.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// dryRun is one run of the runner in a repository of its own.
type dryRun struct {
	out, stdout, summary string
	report               Report
	exit                 int
	took                 time.Duration
	sinceSignal          time.Duration // from the signal to the runner's end
	files                []string      // what the runner left in its output directory
}

// runCheck runs the runner with the stand-ins, the environment env and args, and returns
// what it did; a SIGTERM is sent to the runner once its output contains signalAt (if not
// empty): a point in the run rather than a time, which a busy machine would move.
func runCheck(t *testing.T, env []string, signalAt string, args ...string) dryRun {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the runner is for Linux")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := binaries(t)
	repo := t.TempDir()
	gpu := filepath.Join(repo, ".gpu")
	for _, d := range []string{gpu, filepath.Join(repo, "device", "cuda"), filepath.Join(repo, "fixtures", "testdata"), filepath.Join(repo, "tools")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runner, err := os.ReadFile("../gpurun.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gpu, "run.sh"), runner, 0o755); err != nil {
		t.Fatal(err)
	}
	// the binaries packed, as tools/gpucheck.sh packs them
	if out, err := exec.Command("tar", "-czf", filepath.Join(gpu, "bin.tar.gz"), "-C", bin, "gpureport", "test2json", "cuda.test", "verity").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "OUT")
	cmd := exec.Command(filepath.Join(gpu, "run.sh"), append(args, out)...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "VERITY_TIME_DIVISOR="+divisor, "VERITY_PYTHON="+filepath.Join(bin, "python"))
	cmd.Env = append(cmd.Env, env...)
	stdout := &watchedBuffer{want: signalAt}
	cmd.Stdout, cmd.Stderr = stdout, stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if signalAt != "" {
		stdout.seen = func() { cmd.Process.Signal(syscall.SIGTERM) }
	}
	err = cmd.Wait()
	r := dryRun{out: out, stdout: stdout.String(), took: time.Since(start)}
	if !stdout.at.IsZero() {
		r.sinceSignal = time.Since(stdout.at)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(out)
	for _, de := range des {
		r.files = append(r.files, de.Name())
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatalf("no summary.txt in the output (%v); the runner printed:\n%s", err, r.stdout)
	}
	r.summary = string(b)
	if b, err := os.ReadFile(filepath.Join(out, "report.json")); err != nil || json.Unmarshal(b, &r.report) != nil {
		t.Errorf("report.json: %v", err)
	}
	// What the device tool returns: at most 8 files, each at most 16 MiB, named plainly.
	if len(r.files) > 8 {
		t.Errorf("%d files in the output directory: %v", len(r.files), r.files)
	}
	for _, f := range r.files {
		if strings.HasPrefix(f, ".") {
			t.Errorf("a temporary file was left in the output: %s", f)
		}
		if st, err := os.Stat(filepath.Join(out, f)); err == nil && st.Size() > 16<<20 {
			t.Errorf("%s is %d bytes", f, st.Size())
		}
	}
	// The summary is the last thing printed.
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "gpucheck.tar.gz)") ||
		!strings.Contains(r.stdout, strings.TrimSpace(r.summary)+"\n(files: ") {
		t.Errorf("the runner's output does not end with the summary:\n%s", tail(r.stdout, 3000))
	}
	return r
}

func (r dryRun) phase(name string) Phase {
	for _, p := range r.report.Phases {
		if p.Name == name {
			return p
		}
	}
	return Phase{}
}

func (r dryRun) want(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if !strings.Contains(r.summary, s) {
			t.Errorf("the summary lacks %q:\n%s", s, r.summary)
		}
	}
}

// allPhases are the runner's phases in order.
var allPhases = []string{"smoke", "conformance", "goldens", "forward", "bandwidth", "megakernel", "megakernel-stall", "seed001-megakernel",
	"bench-target", "bench-target-megakernel", "torchref", "bench-bf16", "bench-bf16-megakernel", "seed001", "jit", "bench-1b",
	"bench-small", "bench-small-megakernel", "split", "real-sizes", "fault"}

// Everything passes: every phase runs, the report has every section and the ratios, the
// output holds three files, and the exit status is 0.
func TestDryRunAllPass(t *testing.T) {
	t.Parallel()
	r := runCheck(t, nil, "", "--deadline", "60")
	if r.exit != 0 {
		t.Errorf("exit %d:\n%s", r.exit, r.stdout)
	}
	var names []string
	for _, p := range r.report.Phases {
		names = append(names, p.Name)
		if p.Status != "pass" {
			t.Errorf("phase %s: %s (%s)", p.Name, p.Status, p.Reason)
		}
	}
	if strings.Join(names, " ") != strings.Join(allPhases, " ") {
		t.Errorf("phases %v, want %v", names, allPhases)
	}
	if strings.Join(r.files, " ") != "gpucheck.tar.gz report.json summary.txt" {
		t.Errorf("output files %v", r.files)
	}
	r.want(t, "== GPU check: NVIDIA H200, sm_90, 132 SMs", "smoke ", "ok", "goldens: 38 of 38 fixtures match",
		"goldens (split cuda:0,cuda:0): 37 of 38", "hand-off cuda:0,cpu: 700 between stages, 35.5 µs each",
		"modules: 2 sm_90 cubin", "megakernel: 128 registers", "JIT of the PTX (no compute cache): 1 modules in 21.0 s (megakernel 21.0 s)",
		"cubins vs JIT-compiled PTX: 40 kernels compared, 0 differ", "fault test: CUDA_ERROR_ILLEGAL_ADDRESS",
		"bench-target-megakernel", "llama-1b-q4_k_m", "verify ms by nodes: 1:0.50 8:0.70",
		"seed001-megakernel       seed001 protocol: 640 µs per call (modelled 800 µs: measured/modelled 0.80), 12500 verified positions/s, 93% of the floor; error 1.10e-02 (gate 6.5e-02), 8/8 nodes bit-identical to decoding — PASS; wrong variants caught",
		"verify, Verity megakernel, seed001 protocol: 640 µs → ",
		"PyTorch peer (torch 2.11.0, NVIDIA H200, same call): 8-node verify after 2048: eager 9100 µs, CUDA graph 3150 µs",
		"verify, Verity megakernel, llama-1b-bf16: 700 µs → 13.00× torch eager, 4.50× torch CUDA graph",
		"matvec bf16, 1 column(s): cuBLAS (best model shape) vs Verity: 3800 vs 3100 GB/s → Verity 0.82×",
		"streaming read (torch.sum) vs Verity's fastest matvec: 4400 vs 3800 GB/s",
		"fixtures generated: llama-1b-q4_k_m")
	if r.took > 60*time.Second {
		t.Errorf("took %v, past the 60 s deadline", r.took)
	}
}

// The test binary dies before its first test (cuInit failing): the smoke phase says so with
// the binary's message, every later phase on the device is skipped for it, the peer still
// runs, and the exit status is 1.
func TestDryRunDiesAtStart(t *testing.T) {
	t.Parallel()
	r := runCheck(t, []string{"STANDIN=die=1"}, "", "--deadline", "60")
	if r.exit != 1 {
		t.Errorf("exit %d", r.exit)
	}
	if p := r.phase("smoke"); p.NoTests == "" || !strings.Contains(p.NoTests, "UnknownErrorCode:34") {
		t.Errorf("smoke phase %+v", p)
	}
	for _, name := range []string{"conformance", "bench-target", "jit"} {
		if p := r.phase(name); p.Status != "skipped" || !strings.Contains(p.Reason, "died before its first test") {
			t.Errorf("phase %s: %+v", name, p)
		}
	}
	if p := r.phase("torchref"); p.Status != "pass" {
		t.Errorf("the peer: %+v", p)
	}
	r.want(t, "DIED AT START (exit 1)", "UnknownErrorCode:34", "SKIPPED  the test binary died before its first test", "PyTorch peer")
}

// A phase that hangs is ended at its limit by the test binary's own timeout, its unfinished
// test and the panic are named, and the phases after it still run; one that faults names the
// kernel and case; one whose binary crashes is a failure with the crash.
func TestDryRunHangFaultCrash(t *testing.T) {
	t.Parallel()
	r := runCheck(t, []string{"STANDIN=TestGoldens=hang,TestConformance=lost,TestHostTransfer=exit"}, "", "--deadline", "60")
	if r.exit != 1 {
		t.Errorf("exit %d", r.exit)
	}
	if p := r.phase("goldens"); p.Status != "timeout" || len(p.Unfinished) != 1 || p.Unfinished[0] != "TestGoldens" ||
		!strings.Contains(p.Crash, "panic: test timed out") {
		t.Errorf("goldens phase %+v", p)
	}
	if p := r.phase("conformance"); p.Status != "fail" || !strings.Contains(p.Lost, "matvec_q4_K case 4096x2048") {
		t.Errorf("conformance phase %+v", p)
	}
	if p := r.phase("bandwidth"); p.Status != "fail" || len(p.Unfinished) != 1 || !strings.Contains(p.Crash, "SIGSEGV") {
		t.Errorf("bandwidth phase %+v", p)
	}
	for _, name := range []string{"forward", "megakernel", "split", "fault"} {
		if p := r.phase(name); p.Status != "pass" {
			t.Errorf("phase %s after the hang: %+v", name, p)
		}
	}
	r.want(t, "goldens                  TIMEOUT", "did not finish: TestGoldens", "panic: test timed out",
		"DEVICE LOST at matvec_q4_K case 4096x2048: cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS",
		"STOPPED at matvec_q4_K case 4096x2048 (device lost), 40 kernels not checked",
		"DID NOT FINISH TestHostTransfer [bandwidth]", "SIGSEGV: segmentation violation (stand-in)")
}

// A megakernel that gives up reports its status words in the summary, and its benches still run
// (the phase ended).
func TestDryRunMegakernelStall(t *testing.T) {
	t.Parallel()
	r := runCheck(t, []string{"STANDIN=TestMegakernelGoldens=stall"}, "", "--deadline", "60")
	if p := r.phase("megakernel"); p.Status != "fail" {
		t.Errorf("megakernel phase %+v", p)
	}
	if p := r.phase("bench-target-megakernel"); p.Status != "pass" {
		t.Errorf("the megakernel bench after a stall: %+v", p)
	}
	r.want(t, "megakernel stall (TestMegakernelGoldens):", "block 17 gave up at item 3", "short of 6")
}

// A megakernel that never finishes its phase keeps the megakernel benches from running.
func TestDryRunMegakernelHang(t *testing.T) {
	t.Parallel()
	r := runCheck(t, []string{"STANDIN=TestMegakernelGoldens=hang", "STANDIN_MK=hang"}, "", "--deadline", "60")
	for _, name := range []string{"seed001-megakernel", "bench-target-megakernel", "bench-bf16-megakernel", "bench-small-megakernel"} {
		if p := r.phase(name); p.Status != "skipped" || !strings.Contains(p.Reason, "megakernel phase did not run to its end") {
			t.Errorf("phase %s: %+v", name, p)
		}
	}
	if p := r.phase("bench-target"); p.Status != "pass" {
		t.Errorf("the eager bench: %+v", p)
	}
}

// Benches that all hang are each killed at their limit, and once the deadline is near the
// rest are skipped, saying so: the summary is still printed before the deadline. The deadline
// leaves room for at least one bench after the phases before them, which on a loaded machine
// (unpacking the binaries, starting the stand-ins) took 14 s of a 20 s deadline.
func TestDryRunDeadline(t *testing.T) {
	t.Parallel()
	const deadline = 30
	r := runCheck(t, []string{"STANDIN_BENCH=hang", "STANDIN_PY=hang"}, "", "--deadline", fmt.Sprint(deadline))
	if r.took > deadline*time.Second {
		t.Errorf("took %v, past the %d s deadline", r.took, deadline)
	}
	killed, skipped := 0, 0
	for _, p := range r.report.Phases {
		switch {
		case p.Status == "killed":
			killed++
		case p.Status == "skipped" && strings.HasPrefix(p.Reason, "deadline:"):
			skipped++
		}
	}
	if killed == 0 || skipped == 0 {
		t.Errorf("%d phases killed, %d skipped for the deadline:\n%s", killed, skipped, r.summary)
	}
	if p := r.phase("fault"); p.Status != "skipped" {
		t.Errorf("the last phase ran: %+v", p)
	}
	if b := r.report.Benches; len(b) == 0 || b[0].Error == "" {
		t.Errorf("a killed bench's rows: %+v", b)
	}
	r.want(t, "KILLED", "SKIPPED  deadline:", "NO ROWS")
}

// A runner stopped by a signal publishes what it has and prints the summary.
func TestDryRunSignal(t *testing.T) {
	t.Parallel()
	r := runCheck(t, []string{"STANDIN=TestConformance=hang"}, "== conformance: cuda.test", "--deadline", "60")
	if r.exit != 143 {
		t.Errorf("exit %d", r.exit)
	}
	if p := r.phase("smoke"); p.Status != "pass" {
		t.Errorf("smoke %+v", p)
	}
	if r.sinceSignal == 0 || r.sinceSignal > 8*time.Second {
		t.Errorf("the signal took %v to end the runner", r.sinceSignal)
	}
	r.want(t, "note: run.sh: stopped by a signal after")
}

// The runner refuses a bad deadline before doing anything.
func TestDryRunBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--deadline", "soon"}, {"--frob"}, {"a", "b"}} {
		cmd := exec.Command("bash", append([]string{"../gpurun.sh"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "run.sh") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}

// Every test of the CUDA backend runs in exactly one of the runner's phases, and the stand-in
// binary has every one of them (so that the dry runs run the phases the real check runs).
func TestRunnerCoversEveryGPUTest(t *testing.T) {
	runner, err := os.ReadFile("../gpurun.sh")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []*regexp.Regexp
	for _, m := range regexp.MustCompile(`(?m)^test_phase \S+ \d+ '([^']+)'`).FindAllSubmatch(runner, -1) {
		patterns = append(patterns, regexp.MustCompile(string(m[1])))
	}
	if len(patterns) < 10 {
		t.Fatalf("found %d test phases in gpurun.sh", len(patterns))
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	names := func(glob string) map[string]bool {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", glob, err)
		}
		out := map[string]bool{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range testFunc.FindAllSubmatch(b, -1) {
				out[string(m[1])] = true
			}
		}
		return out
	}
	real, standin := names("../../device/cuda/*_test.go"), names("testdata/standin/*_test.go")
	for name := range real {
		n := 0
		for _, p := range patterns {
			if p.MatchString(name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s runs in %d phases of tools/gpurun.sh, want 1: add it to one phase's -test.run pattern (a test that ends the process's CUDA context gets a phase of its own)", name, n)
		}
		if !standin[name] {
			t.Errorf("%s has no stand-in in tools/gpureport/testdata/standin (one line: func %s(t *testing.T) { act(t, nil) })", name, name)
		}
	}
	for name := range standin {
		if !real[name] {
			t.Errorf("the stand-in has %s, which device/cuda does not", name)
		}
	}
}

// watchedBuffer collects a process's output and calls seen once when want first appears in it.
type watchedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen func()
	at   time.Time
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && w.at.IsZero() && w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		w.at = time.Now()
		w.seen()
	}
	return len(p), nil
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
