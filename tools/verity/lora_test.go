package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --lora merges an adapter at load in every command that loads a model; lora merge writes the
// same weights to a file; inspect describes an adapter; check runs the merged fixtures and
// keeps every golden at scale 0.
func TestLoRA(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	dir := t.TempDir()
	adapter := filepath.Join(dir, "a.gguf")
	out, err := run(t, "fixture", "tiny-llama-q8_0+lora-r8", "-o", adapter)
	if err != nil || strings.TrimSpace(out) != adapter {
		t.Fatalf("fixture: %v\n%s", err, out)
	}
	out, err = run(t, "inspect", adapter)
	if err != nil || !strings.Contains(out, "LoRA for llama: 15 targets, rank 8, alpha 16") || !strings.Contains(out, "transposed pair") {
		t.Errorf("inspect: %v\n%s", err, out)
	}
	if out, err = run(t, "inspect", "--json", adapter); err != nil || !strings.Contains(out, `"adapter": {`) || !strings.Contains(out, `"tensor": "token_embd.weight"`) {
		t.Errorf("inspect --json: %v\n%s", err, out)
	}
	logits := func(name string, args ...string) []byte {
		t.Helper()
		path := filepath.Join(dir, name)
		if out, err := run(t, append([]string{"logits", "--tokens", "1,2,3,4", "--out", path}, args...)...); err != nil {
			t.Fatalf("logits %v: %v\n%s", args, err, out)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := logits("base", "--model", "tiny-llama-q8_0")
	merged := logits("m", "--model", "tiny-llama-q8_0", "--lora", adapter+":0.5")
	if bytes.Equal(base, merged) {
		t.Error("the adapter changed nothing")
	}
	if !bytes.Equal(base, logits("z", "--model", "tiny-llama-q8_0", "--lora", adapter+":0")) {
		t.Error("scale 0 changed the logits")
	}
	// two halves sum to the whole (on F32, where the merge is exact to rounding, it would be
	// close; on q8_0 the re-quantisation differs), and a fixture name works as --lora
	twice := logits("t", "--model", "tiny-llama-q8_0", "--lora", "tiny-llama-q8_0+lora-r8:0.25", "--lora", adapter+":0.25")
	if bytes.Equal(base, twice) {
		t.Error("two adapters changed nothing")
	}
	file := filepath.Join(dir, "merged.gguf")
	if out, err := run(t, "lora", "merge", "tiny-llama-q8_0", adapter+":0.5", "-o", file); err != nil || !strings.Contains(out, "15 of them merged") {
		t.Fatalf("lora merge: %v\n%s", err, out)
	}
	if !bytes.Equal(merged, logits("f", "--model", file)) {
		t.Error("the merged file's logits differ from merging at load")
	}
	if out, err := run(t, "generate", "--model", "tiny-llama-q8_0", "--lora", adapter, "--prompt", "Hi", "-n", "2"); err != nil || !strings.Contains(out, "lora: merged") {
		t.Errorf("generate --lora: %v\n%s", err, out)
	}
	if out, err := run(t, "bench", "--model", "tiny-llama-q8_0", "--lora", adapter, "--lora-merge-type", "f16", "--prompt", "8", "--decode", "2",
		"-r", "1", "--trees", "1", "--no-warmup", "--format", "csv"); err != nil || !strings.Contains(out, `"tiny-llama-q8_0+a",`) {
		t.Errorf("bench --lora: %v\n%s", err, out)
	}
	if out, err := run(t, "check", "--lora", adapter+":0", "tiny-llama-q8_0", "tiny-llama-f32+lora-r8"); err != nil || !strings.Contains(out, "all 2 fixtures bit-identical") {
		t.Errorf("check: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"logits", "--model", "tiny-qwen3-f32", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora", adapter}, "architecture differs"},
		{[]string{"logits", "--model", "tiny-llama-q8_0", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora", "no-such.gguf"}, "no-such.gguf"},
		{[]string{"logits", "--model", "tiny-llama-q8_0", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora", "tiny-llama-q8_0+nope"}, "no adapter"},
		{[]string{"logits", "--model", "tiny-llama-q8_0", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora", adapter, "--lora-merge-type", "q4_K"}, "merge type"},
		{[]string{"logits", "--model", "tiny-llama-q8_0", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora-merge-type", "f16"}, "goes with --lora"},
		{[]string{"logits", "--model", "tiny-llama-q8_0", "--tokens", "1", "--out", filepath.Join(dir, "x"), "--lora", ":2"}, "no file"},
		{[]string{"lora", "merge", "tiny-llama-q8_0", "tiny-llama-q8_0"}, "-o"},
		{[]string{"lora", "merge", "tiny-llama-q8_0", file, "-o", filepath.Join(dir, "y.gguf")}, "not a LoRA adapter"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "y.gguf")); err == nil {
		t.Error("a failed merge left a file")
	}
}

func TestSplitAdapterSpec(t *testing.T) {
	for _, c := range []struct {
		in    string
		path  string
		scale float64
	}{{"a.gguf", "a.gguf", 1}, {"a.gguf:0.5", "a.gguf", 0.5}, {"a.gguf:-2", "a.gguf", -2}, {"c:/x/a.gguf", "c:/x/a.gguf", 1}, {"x:y.gguf:0", "x:y.gguf", 0}} {
		p, s, err := splitAdapterSpec(c.in)
		if err != nil || p != c.path || s != c.scale {
			t.Errorf("%q: %q %g %v", c.in, p, s, err)
		}
	}
}
