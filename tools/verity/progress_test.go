package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// runWith executes the CLI in-process with its own standard output and error.
func runWith(stdout, stderr io.Writer, args ...string) error {
	root := newRoot()
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(llamaShortFlags(args))
	return root.Execute()
}

// arrivals records each Write with what was true when it arrived (see note).
type arrivals struct {
	mu     sync.Mutex
	writes []string
	notes  []int
	note   func() int
}

func (a *arrivals) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes = append(a.writes, string(p))
	a.notes = append(a.notes, a.note())
	return len(p), nil
}

// check's text rows arrive one per fixture as each finishes: when a fixture's row is written,
// the fixtures after it have not even been generated yet (the fixture cache holds exactly the
// fixtures checked so far), so no row waits for the others.
func TestCheckStreamsRows(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("VERITY_CACHE", cache)
	names := []string{"tiny-llama-q8_0", "tiny-qwen3-q8_0", "tiny-llama-q4_0"}
	generated := func() int {
		m, _ := filepath.Glob(filepath.Join(cache, "fixtures", "*.gguf"))
		return len(m)
	}
	out := &arrivals{note: generated}
	var errOut bytes.Buffer
	if err := runWith(out, &errOut, append([]string{"check"}, names...)...); err != nil {
		t.Fatalf("%v\n%s%s", err, strings.Join(out.writes, ""), errOut.String())
	}
	var rows []int // the fixtures generated when each fixture's row arrived
	for i, w := range out.writes {
		for j, n := range names {
			if strings.HasPrefix(w, n+" ") {
				if len(rows) != j {
					t.Fatalf("row of %s arrived out of order: %q", n, out.writes)
				}
				if !regexp.MustCompile(`^` + n + ` +ok +ok +ok +[0-9.]+\n$`).MatchString(w) {
					t.Errorf("row %q: not a whole row in one write", w)
				}
				rows = append(rows, out.notes[i])
			}
		}
	}
	if len(rows) != len(names) {
		t.Fatalf("%d rows, want %d: %q", len(rows), len(names), out.writes)
	}
	for i, g := range rows {
		if g != i+1 {
			t.Errorf("row %d (%s) arrived with %d fixtures generated, want %d: rows are held back", i, names[i], g, i+1)
		}
	}
	if last := out.writes[len(out.writes)-1]; !strings.Contains(last, "all 3 fixtures bit-identical") {
		t.Errorf("last write %q", last)
	}
	if errOut.Len() != 0 { // in-process, stderr is not a file: no progress lines
		t.Errorf("stderr %q", errOut.String())
	}
}

// jobProgress writes a line as each step starts and ends into a file that is not a terminal
// when the job asks for log lines, into any writer with lines (llama-bench's --progress),
// and nothing into a writer that is not a file otherwise.
func TestJobProgressLines(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	job := func(w io.Writer, logLines, lines bool) {
		j := newJobProgress(w, 2, "bench", logLines, lines)
		for _, s := range []string{"first", "second"} {
			j.Start(s)
			j.Above(func() { io.WriteString(w, "row "+s+"\n") })
			j.Done()
		}
		j.Finish()
		j.Finish() // again: nothing
	}
	linesRe := regexp.MustCompile(`^bench 1/2: first …\nrow first\nbench 1/2: first: [0-9.]+ s\nbench 2/2: second …\nrow second\nbench 2/2: second: [0-9.]+ s\n$`)
	job(f, true, false)
	if b, _ := os.ReadFile(f.Name()); !linesRe.Match(b) {
		t.Errorf("a log file:\n%s", b)
	}
	var b bytes.Buffer
	job(&b, true, false)
	if b.String() != "row first\nrow second\n" {
		t.Errorf("not a file, no --progress:\n%s", b.String())
	}
	b.Reset()
	job(&b, false, true)
	if !linesRe.Match(b.Bytes()) {
		t.Errorf("--progress:\n%s", b.String())
	}
	if f, err := os.Create(filepath.Join(t.TempDir(), "log2")); err == nil {
		job(f, false, false) // check: its rows are the lines already
		if b, _ := os.ReadFile(f.Name()); string(b) != "row first\nrow second\n" {
			t.Errorf("a log file, no log lines:\n%s", b)
		}
		f.Close()
	}
}

// bench says when each run starts and ends: with --progress wherever stderr goes, and
// without it when stderr is a file that is not a terminal (a log); not into a writer that is
// not a file (the CLI run in-process) otherwise.
func TestBenchProgress(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	args := []string{"bench", "--model", path, "--prompt", "8", "--decode", "2", "--threads", "1,2", "-r", "1", "--trees", "1", "--no-warmup"}
	want := regexp.MustCompile(`^bench 1/2: tiny-llama-f32.gguf, cpu[^\n]*, depth 0, prompt 8, decode 2 …\n` +
		`bench 1/2: tiny-llama-f32.gguf, [^\n]*: [0-9.]+ s\n` +
		`bench 2/2: tiny-llama-f32.gguf, cpu[^\n]*, depth 0, prompt 8, decode 2 …\n` +
		`bench 2/2: tiny-llama-f32.gguf, [^\n]*: [0-9.]+ s\n$`)
	var out, errOut bytes.Buffer
	if err := runWith(&out, &errOut, append(args, "--progress")...); err != nil {
		t.Fatal(err)
	}
	if !want.Match(errOut.Bytes()) {
		t.Errorf("--progress: stderr\n%s", errOut.String())
	}
	if strings.Contains(out.String(), "bench 1/2") {
		t.Errorf("progress on stdout:\n%s", out.String())
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out.Reset()
	if err := runWith(&out, f, args...); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Name()); !want.Match(b) {
		t.Errorf("stderr a file: \n%s", b)
	}
	errOut.Reset()
	if err := runWith(&out, &errOut, args...); err != nil || errOut.Len() != 0 {
		t.Errorf("stderr not a file: %v, %q", err, errOut.String())
	}
}

// bench finds every model before its bandwidth probe allocates its 2 × 256 MiB: a missing
// model (alone, or after one that exists, at every thread count of a sweep) costs next to
// nothing. (Before the fix the probe ran first and the same error cost 512 MiB.)
func TestBenchModelBeforeProbe(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	path := tinyModel(t, "tiny-llama-f32")
	for _, models := range [][]string{
		{"--model", "/no/such/file.gguf"},
		{"--model", "no-such-fixture"},
		{"--model", path, "--model", "/no/such/file.gguf"},
	} {
		args := append([]string{"bench", "--threads", "1,2", "--prompt", "8", "--decode", "2", "-r", "1", "--no-warmup"}, models...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := runWith(io.Discard, io.Discard, args...)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "no such") {
			t.Errorf("%v: err %v", models, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Errorf("%v: %d MiB allocated before the missing model was found: the probe ran first", models, d>>20)
		}
	}
}
