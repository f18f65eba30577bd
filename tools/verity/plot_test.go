package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the charts say, read from their SVG text: a compare chart names each group's backend
// (the same test at two thread counts is not a repeat) and its noise band; a bench sweep's
// tree widths and batches are one chart each per model and thread count, a series per run;
// the rooflines label every decade alike (1M beside 100k, not 1e+06).
func TestPlotLabels(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	dir := t.TempDir()
	svg := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	path := tinyModel(t, "tiny-llama-f32")
	rows := filepath.Join(dir, "rows.jsonl")
	out, err := run(t, "bench", "-m", path, "-p", "8,16", "-n", "2", "-r", "2", "-t", "1,2", "--trees", "1", "--no-warmup",
		"--widths", "1,4", "--batch", "1,2", "-o", "jsonl", "--plot", filepath.Join(dir, "sweep.svg"))
	if err != nil || os.WriteFile(rows, []byte(out), 0o644) != nil {
		t.Fatal(err)
	}
	s := svg("sweep.svg")
	for title, want := range map[string]int{"tree verify against its width, tiny-llama-f32.gguf, 1 threads": 1,
		"tree verify against its width, tiny-llama-f32.gguf, 2 threads": 1, "batched decoding, tiny-llama-f32.gguf, 1 threads": 1,
		"all sessions, depth 0, prompt 16": 2, "per session, depth 0, prompt 8": 2, "after 8+2 tokens": 2, "after 16+2 tokens": 2} {
		if n := strings.Count(s, title); n != want {
			t.Errorf("sweep.svg: %d × %q, want %d", n, title, want)
		}
	}
	if _, err := run(t, "compare", rows, rows, "--plot", filepath.Join(dir, "compare.svg")); err != nil {
		t.Fatal(err)
	}
	s = svg("compare.svg")
	for _, want := range []string{"cpu (1 threads)", "cpu (2 threads)", "noise"} {
		if !strings.Contains(s, want) {
			t.Errorf("compare.svg lacks %q", want)
		}
	}
	if _, err := run(t, "schedule", "--model", "tiny-llama-q8_0", "--context", "64", "--plot", filepath.Join(dir, "schedule.svg")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "kernels", "--plot", filepath.Join(dir, "kernels.svg")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"schedule.svg", "kernels.svg"} {
		s := svg(name)
		if strings.Contains(s, "e+0") || !strings.Contains(s, ">100<") {
			t.Errorf("%s: decades labelled unlike", name)
		}
	}
	if s := svg("schedule.svg"); !strings.Contains(s, ">1M<") || !strings.Contains(s, ">10k<") {
		t.Errorf("schedule.svg: no 10k and 1M ticks")
	}
}
