package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"verity/host/machine"
	"verity/host/plan"
)

func TestInfoJSON(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out, err := run(t, "info", "--json", "--model", path)
	if err != nil {
		t.Fatal(err)
	}
	var m machine.Facts
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if m.CPU.LogicalCores < 1 || m.Memory.BudgetBytes <= 0 || len(m.Copies) == 0 || m.Copies[0].BytesPerSec <= 0 || m.Identity == "" {
		t.Errorf("info --json: %s", out)
	}
	if len(m.Disks) == 0 || m.Disks[0].BytesPerSec <= 0 {
		t.Errorf("no read speed measured for --model: %+v", m.Disks)
	}
	text, err := run(t, "info")
	if err != nil || !strings.Contains(text, "budget") || !strings.Contains(text, m.Identity) {
		t.Errorf("info: %v %q", err, text)
	}
}

func TestPlanCommand(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out, err := run(t, "plan", "--model", path, "--json", "--no-predict")
	if err != nil {
		t.Fatal(err)
	}
	var pl plan.Plan
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if pl.Context != 256 || pl.ContextFrom != "trained" || pl.KVBytes <= 0 || len(pl.Stages) != 1 || len(pl.Rationale) == 0 {
		t.Errorf("plan %+v", pl)
	}
	text, err := run(t, "plan", "--model", path)
	if err != nil || !strings.Contains(text, "predicted   decode") || !strings.Contains(text, "context     256 positions") {
		t.Errorf("plan: %v %s", err, text)
	}
	// a context or a batch beyond memory: refused with the numbers, before anything is allocated
	for _, args := range [][]string{
		{"plan", "--model", path, "--context", "1000000000"},
		{"serve", "--model", path, "--context", "100000000", "--addr", "127.0.0.1:0"},
		{"serve", "--model", path, "--sessions", "1000000000", "--context", "256", "--addr", "127.0.0.1:0"},
		{"logits", "--model", path, "--tokens", "1,2", "--out", filepath.Join(t.TempDir(), "l.f32"), "--context", "1000000000"},
		{"generate", "--model", path, "--prompt", "Hi", "--context", "1000000000"},
		{"bench", "--model", path, "--batch", "64", "--prompt", "100000000", "--decode", "1", "-r", "1"},
	} {
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "not enough memory") || !strings.Contains(err.Error(), "K/V cache") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// -n past the context generates what fits and says so; a context past the trained one warns.
func TestGenerateContext(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out, err := run(t, "generate", "--model", path, "--prompt", "Hello", "-n", "1000")
	if err != nil || !strings.Contains(out, "the context of 256 positions (trained) holds") || !strings.Contains(out, "generated") {
		t.Errorf("-n 1000: %v %s", err, out)
	}
	out, err = run(t, "generate", "--model", path, "--prompt", "Hello", "-n", "4", "--context", "512")
	if err != nil || !strings.Contains(out, "warning: a context of 512 positions exceeds the 256 the model was trained for") {
		t.Errorf("--context 512: %v %s", err, out)
	}
	if _, err := run(t, "generate", "--model", path, "--prompt", strings.Repeat("a b ", 300), "-n", "4"); err == nil || !strings.Contains(err.Error(), "leaves no room") {
		t.Errorf("a prompt past the context: %v", err)
	}
}

// generate --chat --messages fits a long conversation to the context: the system message and
// the latest turns, room for the answer, and a note of what was dropped.
func TestGenerateChatFit(t *testing.T) {
	path := tinyModel(t, "tiny-qwen3-q8_0")
	conv := []map[string]string{{"role": "system", "content": "Be brief."}}
	for i := range 30 {
		conv = append(conv, map[string]string{"role": "user", "content": fmt.Sprintf("question %d about the sky", i)},
			map[string]string{"role": "assistant", "content": fmt.Sprintf("answer %d: blue", i)})
	}
	b, _ := json.Marshal(conv)
	file := filepath.Join(t.TempDir(), "chat.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "generate", "--model", path, "--chat", "--messages", file, "--prompt", "and the sea?", "-n", "8", "--chat-template", "chatml", "--echo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kept the 1 system message(s) and the latest turns, dropped") || !strings.Contains(out, "<|im_start|>system\nBe brief.<|im_end|>") ||
		!strings.Contains(out, "and the sea?") || !strings.Contains(out, "answer 29: blue") || strings.Contains(out, "question 0 about") {
		t.Errorf("a long conversation: %s", out)
	}
}
