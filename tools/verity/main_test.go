package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"verity/device"
	"verity/device/cuda"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
)

// run executes the CLI in-process.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(llamaShortFlags(args))
	err := root.Execute()
	return out.String(), err
}

func tinyModel(t *testing.T, name string) string {
	t.Helper()
	s, err := fixtures.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	if err := fixtures.Generate(s, path, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspect(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out, err := run(t, "inspect", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"architecture  llama", "file type     7 (Q8_0)", "blk.1.ffn_down.weight", "q8_0", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	out, err = run(t, "inspect", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Metadata map[string]any
		Tensors  []struct {
			Name, Type    string
			Dims          []int64
			Offset, Bytes int64
		}
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Metadata["general.architecture"] != "llama" || len(j.Tensors) == 0 {
		t.Fatalf("json: %v", j.Metadata["general.architecture"])
	}
	if toks, ok := j.Metadata["tokenizer.ggml.tokens"].([]any); !ok || len(toks) != 320 {
		t.Errorf("token list not printed in full")
	}
	for _, tt := range j.Tensors {
		if tt.Name == "blk.0.attn_q.weight" && (tt.Type != "q8_0" || tt.Bytes != 64*64/32*34) {
			t.Errorf("tensor entry %+v", tt)
		}
	}
	if _, err := run(t, "inspect", filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestLogitsAndVerifyTree(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	dir := t.TempDir()
	all, tree := filepath.Join(dir, "all.f32"), filepath.Join(dir, "tree.f32")
	if _, err := run(t, "logits", "--model", path, "--tokens", "5,6,7,8", "--out", all); err != nil {
		t.Fatal(err)
	}
	// tree root 7 with child 8: its rows equal the prefix's last two positions
	if _, err := run(t, "logits", "--model", path, "--tokens", "5,6", "--verify-tree", "7:-1,8:0,9:0", "--out", tree); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(all)
	b, _ := os.ReadFile(tree)
	nv := 320 * 4
	if len(a) != 4*nv || len(b) != 3*nv {
		t.Fatalf("sizes %d, %d", len(a), len(b))
	}
	if !bytes.Equal(a[2*nv:4*nv], b[:2*nv]) {
		t.Error("tree nodes' logits differ from decoding their paths")
	}
	for _, bad := range [][]string{
		{"--tokens", "5,99999"}, {"--tokens", "x"}, {"--tokens", "5", "--verify-tree", "7:0"}, {"--tokens", "5", "--verify-tree", "7:-1,8:3"},
	} {
		args := append([]string{"logits", "--model", path, "--out", filepath.Join(dir, "x")}, bad...)
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestQuantizeAndInfo(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	out := filepath.Join(t.TempDir(), "q.gguf")
	if _, err := run(t, "quantize", "-q", path, out, "--type", "q4_0"); err != nil {
		t.Fatal(err)
	}
	s, _ := run(t, "inspect", out)
	if !strings.Contains(s, "2 (Q4_0)") {
		t.Error("quantised file has the wrong file type")
	}
	// q4_K on 64-wide rows falls back to q5_0, with a warning per tensor, as llama.cpp does.
	if s, err := run(t, "quantize", "-q", path, out, "Q4_K_M"); err != nil || !strings.Contains(s, "not whole q4_K blocks: q5_0 instead") {
		t.Errorf("Q4_K_M on 64-wide rows: %v\n%s", err, s)
	}
	if s, err := run(t, "quantize", "-q", path, out, "Q8_0", "--pure", "--output-tensor-type", "f16"); err != nil || !strings.Contains(s, "weights: 1 f16, 15 q8_0") {
		t.Errorf("--output-tensor-type f16: %v\n%s", err, s)
	}
	if s, err := run(t, "info"); err != nil || !strings.Contains(s, "cores") {
		t.Errorf("info: %v %q", err, s)
	}
}

// check runs goldens through the CPU twins and through the PTX interpreter, and reports a
// differing fixture as a failure.
func TestCheck(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	for _, backend := range []string{"cpu", "ptxvm"} {
		out, err := run(t, "check", "--backend", backend, "tiny-llama-q8_0", "tiny-q35moe-q4_0")
		if err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, out)
		}
		if !strings.Contains(out, "all 2 fixtures bit-identical") || strings.Contains(out, "DIFFERS") {
			t.Errorf("%s: unexpected output:\n%s", backend, out)
		}
	}
	if _, err := run(t, "check", "no-such-fixture"); err == nil || !strings.Contains(err.Error(), "no golden") {
		t.Errorf("unknown fixture: err = %v", err)
	}
	// --json: one object per fixture, as it finishes
	out, err := run(t, "check", "--json", "tiny-llama-q8_0", "tiny-qwen3-q8_0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	for i, want := range []string{"tiny-llama-q8_0", "tiny-qwen3-q8_0"} {
		var row map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &row); err != nil || row["fixture"] != want || row["prefill"] != "ok" || row["greedy"] != "ok" ||
			!strings.HasPrefix(row["backend"].(string), "cpu") || row["seconds"].(float64) <= 0 {
			t.Errorf("row %d: %v %v", i, row, err)
		}
	}
}

// The weak-memory interpreter is a backend like the others.
func TestCheckWeak(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	out, err := run(t, "check", "--backend", "ptxvm-weak:2", "tiny-llama-q8_0")
	if err != nil || !strings.Contains(out, "all 1 fixtures bit-identical") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestBackendErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"tpu", "want cpu, ptxvm, ptxvm-weak[:SEED], cuda or cuda:N"},
		{"cuda:x", "device number"},
		{"ptxvm-weak:x", "decimal seed"},
		{"cuda", "without CUDA"}, // checked only in binaries built without the cuda tag
	} {
		if c.spec == "cuda" && cuda.Count() > 0 {
			continue
		}
		if _, err := cuda.Open(0); c.spec == "cuda" && !errors.Is(err, device.ErrNotBuilt) {
			continue
		}
		b, err := openBackend(c.spec, 1)
		if err == nil {
			b.Close()
			t.Errorf("%s: no error", c.spec)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to mention %q", c.spec, err, c.want)
		}
	}
}

// A comma-separated --backend splits the layers into a pipeline; the goldens still hold.
func TestCheckPipeline(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	out, err := run(t, "check", "--backend", "cpu,ptxvm", "tiny-q35moe-q4_0")
	if err != nil || !strings.Contains(out, "cpu (") || !strings.Contains(out, "→ ptxvm") || !strings.Contains(out, "bit-identical") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
	out, err = run(t, "check", "--backend", "cpu,cpu", "--layers", "3", "tiny-q35moe-q4_0")
	if err != nil || !strings.Contains(out, "bit-identical") {
		t.Fatalf("--layers 3: err %v, output:\n%s", err, out)
	}
	if _, err := run(t, "check", "--backend", "cpu,cpu", "--layers", "9", "tiny-q35moe-q4_0"); err == nil {
		t.Error("--layers past the last layer: no error")
	}
	// A 3-way split of a 2-layer model is a row of its own: the other fixtures still run and
	// keep their rows.
	out, err = run(t, "check", "--backend", "cpu,cpu,cpu", "tiny-llama-q8_0", "tiny-q35moe-q4_0")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 fixtures") {
		t.Errorf("3-way split: err %v", err)
	}
	if !strings.Contains(out, "cannot be split into 3 stages") || !regexp.MustCompile(`tiny-q35moe-q4_0 +ok +ok +ok`).MatchString(out) {
		t.Errorf("3-way split: output:\n%s", out)
	}
}

func TestServeArguments(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	if _, err := run(t, "serve"); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("serve without a model: %v", err)
	}
	if _, err := run(t, "serve", "--model", filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("serve of a missing file: no error")
	}
	if _, err := run(t, "serve", "--model", "tiny-llama-q8_0", "--backend", "tpu"); err == nil {
		t.Error("serve on an unknown backend: no error")
	}
}

// tokenize prints the ids logits --prompt runs, decodes them back, and refuses bad input.
func TestTokenize(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	out, err := run(t, "tokenize", "--model", path, "Hello world")
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.TrimSpace(out)
	if !strings.HasPrefix(ids, "318,") { // BOS first
		t.Errorf("tokenize: %q", out)
	}
	text, err := run(t, "tokenize", "--model", path, "--decode", ids)
	if err != nil || text != "<|begin_of_text|>Hello world\n" {
		t.Errorf("decode %s: %q, %v", ids, text, err)
	}
	js, err := run(t, "tokenize", "--model", path, "--json", "--no-special", "Hi")
	if err != nil || js != `{"ids":[72,105],"pieces":["H","i"]}`+"\n" {
		t.Errorf("json: %q, %v", js, err)
	}
	dir := t.TempDir()
	byPrompt, byIDs := filepath.Join(dir, "p.f32"), filepath.Join(dir, "i.f32")
	if _, err := run(t, "logits", "--model", path, "--prompt", "Hello world", "--out", byPrompt); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "logits", "--model", path, "--tokens", ids, "--out", byIDs); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(byPrompt)
	b, _ := os.ReadFile(byIDs)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("logits --prompt differs from logits --tokens with the prompt's ids")
	}
	for _, bad := range [][]string{
		{"tokenize", "--model", path, "--decode", "1,x"},
		{"tokenize", "--model", path, "--decode", "99999"},
		{"tokenize", "Hello"},
		{"tokenize", "--model", path, "--file", filepath.Join(dir, "none.txt")},
		{"logits", "--model", path, "--prompt", "x", "--tokens", "1", "--out", byIDs},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// drift: identical logits pass --max-ulp 0; a changed value is found and fails it.
func TestDrift(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.f32"), filepath.Join(dir, "b.f32")
	if _, err := run(t, "logits", "--model", path, "--tokens", "5,6,7", "--out", a); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(a)
	if err := os.WriteFile(b, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "drift", a, b, "--model", path, "--max-ulp", "0"); err != nil || !strings.Contains(out, "3 identical rows") {
		t.Errorf("identical: %q, %v", out, err)
	}
	raw[4*(320+5)] ^= 1 // row 1, index 5: one ulp
	if err := os.WriteFile(b, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "drift", a, b, "--vocab", "320", "--max-ulp", "0")
	if err == nil || !strings.Contains(out, "first: row 1, index 5") || !strings.Contains(out, "ulps: max 1") {
		t.Errorf("one ulp: %q, %v", out, err)
	}
	if _, err := run(t, "drift", a, b, "--vocab", "320", "--max-ulp", "1"); err != nil {
		t.Errorf("--max-ulp 1: %v", err)
	}
	if _, err := run(t, "drift", a, b); err == nil {
		t.Error("no vocabulary size: accepted")
	}
	if _, err := run(t, "drift", a, b, "--vocab", "7"); err == nil {
		t.Error("rows of 7: accepted")
	}
}

// bench sweeps every combination of --threads, --prompt, --decode and --depth, one run each,
// with one row per test in every format; llama-bench's flags are its flags.
func TestBenchSweep(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	args := []string{"bench", "--model", path, "--prompt", "8,16", "--decode", "2", "--threads", "1,2", "-r", "1", "--trees", "1", "--no-warmup"}
	out, err := run(t, append(args, "--format", "csv")...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	if len(rows) != 1+4*3 || rows[0][0] != "build_commit" {
		t.Fatalf("csv: %d rows: %q", len(rows), out)
	}
	for i, want := range []string{"1", "1", "1", "1", "1", "1", "2", "2", "2", "2", "2", "2"} {
		if got := rows[i+1][col["n_threads"]]; got != want {
			t.Errorf("row %d: threads %s, want %s", i, got, want)
		}
	}
	for _, c := range []string{"samples_ns", "samples_ts", "test", "floor_pct", "command", "verity", "avg_ts"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("csv has no %s column: %v", c, rows[0])
		}
	}
	sameRate := func(sample, mean string) bool { // one repetition: its sample is the mean, each as printed
		a, errA := strconv.ParseFloat(strings.Trim(sample, "[] \""), 64)
		b, errB := strconv.ParseFloat(mean, 64)
		return errA == nil && errB == nil && math.Abs(a-b) <= 1e-4*math.Abs(b)
	}
	if r := rows[1]; r[col["test"]] != "pp" || r[col["n_prompt"]] != "8" || !sameRate(r[col["samples_ts"]], r[col["avg_ts"]]) {
		t.Errorf("one repetition's sample %q is not the mean %q (row %v)", r[col["samples_ts"]], r[col["avg_ts"]], r)
	}
	if r := rows[2]; r[col["test"]] != "tg" || r[col["n_gen"]] != "2" || r[col["n_depth"]] != "8" {
		t.Errorf("decode row: %v", r)
	}
	sql, err := run(t, append(args, "--format", "sql")...)
	if err != nil || !strings.HasPrefix(sql, "CREATE TABLE IF NOT EXISTS llama_bench (") || strings.Count(sql, "INSERT INTO llama_bench") != 12 || strings.Count(sql, "INSERT INTO verity_tests") != 12 {
		t.Errorf("sql: %q, %v", sql, err)
	}
	if _, err := run(t, append(args, "--format", "xml")...); err == nil {
		t.Error("--format xml accepted")
	}
	// --json-out writes each run's whole record beside the table, which fits 120 columns
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	table, err := run(t, append(args, "--json-out", jsonPath)...)
	if err != nil || !strings.Contains(table, "tv8 @ d10") {
		t.Errorf("table with --json-out: %q, %v", table, err)
	}
	for _, line := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}
	var saved []map[string]any
	if b, err := os.ReadFile(jsonPath); err != nil || json.Unmarshal(b, &saved) != nil || len(saved) != 4 || saved[0]["verify_ms_per_tree"] == nil {
		t.Errorf("--json-out file: %d rows, %v", len(saved), err)
	}
	// llama-bench's spelling: -m -p -n -pg -d -r -t -o and the long names
	js, err := run(t, "bench", "-m", path, "-p", "8", "-n", "0", "-pg", "8,2", "-d", "0,4", "-r", "2", "-t", "1", "-o", "json", "--trees", "1", "--no-warmup")
	var tests []map[string]any
	if err != nil || json.Unmarshal([]byte(js), &tests) != nil {
		t.Fatalf("llama-bench flags: %v\n%s", err, js)
	}
	var names []string
	for _, x := range tests {
		names = append(names, fmt.Sprintf("%v %v+%v@%v", x["test"], x["n_prompt"], x["n_gen"], x["n_depth"]))
	}
	want := []string{"pp 8+0@0", "tv 8+0@8", "pp 8+0@0", "tg 0+2@8", "pg 8+2@0", "tv 8+0@10", "pp 8+0@4", "tv 8+0@12", "pp 8+0@4", "tg 0+2@12", "pg 8+2@4", "tv 8+0@14"}
	if !slices.Equal(names, want) || len(tests[0]["samples_ns"].([]any)) != 2 {
		t.Errorf("tests %v, want %v", names, want)
	}
	if _, err := run(t, "bench", "-m", path, "--n-prompt", "8", "--n-gen", "1", "--n-depth", "2", "--output", "jsonl", "-r", "1", "--trees", "1", "--no-warmup"); err != nil {
		t.Errorf("llama-bench's long flag names: %v", err)
	}
	for _, bad := range [][]string{
		{"--prompt", "-1"}, {"-r", "0"}, {"--trees", "0"}, {"--tree-nodes", "0"}, {"--ops", "-1"}, {"-d", "-1"}, {"-pg", "8"}, {"-pg", "0,4"},
		{"--threads", "-1"}, {"--threads", "100000"}, {"--model", "/no/such/file.gguf"},
	} {
		if _, err := run(t, append([]string{"bench", "--model", path, "--no-warmup"}, bad...)...); err == nil {
			t.Errorf("bench %v accepted", bad)
		}
	}
}

// Every command with --threads refuses a negative count and one far past the machine's CPUs.
func TestThreadsChecked(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out := filepath.Join(t.TempDir(), "x")
	for _, args := range [][]string{
		{"logits", "--model", path, "--tokens", "1", "--out", out},
		{"generate", "--model", path, "--tokens", "1", "-n", "1"},
		{"check", "tiny-llama-q8_0"},
		{"quantize", path, out, "--type", "q8_0", "--allow-requantize"},
		{"serve", "--model", path, "--addr", "127.0.0.1:0"},
	} {
		for _, n := range []string{"-3", "100000"} {
			_, err := run(t, append(args, "--threads", n)...)
			if err == nil || !strings.Contains(err.Error(), "--threads "+n) {
				t.Errorf("%s --threads %s: %v", args[0], n, err)
			}
		}
	}
}

// generate is reproducible, the same on the twin and the PTX interpreter, and refuses bad
// settings.
func TestGenerate(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	args := []string{"generate", "--model", path, "--prompt", "Hello world", "-n", "6", "--temperature", "0.9", "--seed", "5"}
	a, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := run(t, append(args, "--backend", "ptxvm")...)
	if err != nil {
		t.Fatal(err)
	}
	text := func(out string) string { // the generated text, before the timing line
		i := strings.LastIndex(out, " prompt tokens")
		if i < 0 {
			t.Fatalf("no timing line in %q", out)
		}
		return out[:strings.LastIndex(out[:i], "\n")]
	}
	if text(a) != text(b) || !strings.Contains(a, "8 prompt tokens") || !strings.Contains(a, "6 generated") {
		t.Errorf("cpu %q, ptxvm %q", a, b)
	}
	// Speculating with prompt-lookup drafts emits the same text, greedy and sampled.
	rep := []string{"generate", "--model", path, "--prompt", strings.Repeat("a b c d ", 6), "-n", "24"}
	for _, smp := range [][]string{{"--temperature", "0"}, {"--temperature", "0.9", "--seed", "5"}} {
		plainOut, err := run(t, append(rep, smp...)...)
		if err != nil {
			t.Fatal(err)
		}
		specOut, err := run(t, append(append(rep, smp...), "--draft", "4")...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(specOut, "verify steps") || text(specOut) != text(plainOut) {
			t.Errorf("%v: with --draft %q, without %q", smp, specOut, plainOut)
		}
	}
	// --stop ends the text before the string.
	g := text(a)
	stop := ""
	for _, r := range g[len(g)/2:] {
		if r != utf8.RuneError && r != '\n' {
			stop = string(r)
			break
		}
	}
	if stop == "" {
		t.Fatalf("no character to stop at in %q", g)
	}
	c, err := run(t, append(args, "--stop", "never", "--stop", stop)...)
	if err != nil {
		t.Fatal(err)
	}
	if want := g[:strings.Index(g, stop)]; text(c) != want {
		t.Errorf("--stop %q: %q, want %q", stop, text(c), want)
	}
	// --chat writes the prompt in a chat template: the model's (the fixture has none) or one
	// given by name, text or file.
	tmpl := filepath.Join(t.TempDir(), "chat.jinja")
	if err := os.WriteFile(tmpl, []byte("{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}[ASSISTANT]"), 0o644); err != nil {
		t.Fatal(err)
	}
	chat := []string{"generate", "--model", path, "--prompt", "Hi", "-n", "2", "--chat", "--system", "Be brief.", "--echo"}
	if out, err := run(t, append(chat, "--chat-template-file", tmpl)...); err != nil || !strings.HasPrefix(out, "<|begin_of_text|>[SYSTEM] Be brief.\n[USER] Hi\n[ASSISTANT]") {
		t.Errorf("--chat-template-file: %q, %v", out, err)
	}
	if out, err := run(t, append(chat, "--chat-template", "{{ messages[-1].content }}!")...); err != nil || !strings.HasPrefix(out, "<|begin_of_text|>Hi!") {
		t.Errorf("--chat-template: %q, %v", out, err)
	}
	if _, err := run(t, chat...); err == nil || !strings.Contains(err.Error(), "give one with --chat-template") {
		t.Errorf("--chat on a model without a template: %v, want a hint at --chat-template", err)
	}
	for _, bad := range [][]string{chat, append(chat, "--chat-template", "{% for"), append(chat, "--chat-template-file", tmpl+".missing"),
		append(chat, "--chat-template", "chatml", "--chat-template-file", tmpl), append(args, "--chat-template", "chatml")} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v accepted", bad[7:])
		}
	}
	// --json: the text is (the start of) a JSON object.
	jsonOut, err := run(t, append(slices.Clone(args[:5]), "-n", "24", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	if j := strings.TrimLeft(text(jsonOut), " \t\r\n"); !strings.HasPrefix(j, "{") {
		t.Errorf("--json: %q", text(jsonOut))
	}
	for _, bad := range [][]string{{"-n", "0"}, {"--temperature", "-1"}, {"--top-p", "2"}, {"--draft", "64"}, {"--stop", ""}} {
		if _, err := run(t, append(args[:6], bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// Off a terminal, progress is one line at the start and one at the end, and nothing for a job
// that never reports (a cached fixture).
func TestByteProgress(t *testing.T) {
	var b bytes.Buffer
	_, finish := byteProgress(&b, 100, "generating x")
	finish()
	if b.Len() != 0 {
		t.Errorf("a job that never reported printed %q", b.String())
	}
	update, finish := byteProgress(&b, 2e6, "generating x")
	update(0, 2e6)
	update(1e6, 2e6)
	update(2e6, 2e6)
	finish()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || lines[0] != "generating x …" || !strings.HasPrefix(lines[1], "generating x: 2.0 MB in ") {
		t.Errorf("progress lines %q", lines)
	}
}

// Every command that reads a model takes a fixture name as well as a file.
func TestFixtureNames(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	const name = "tiny-llama-q8_0"
	out := filepath.Join(t.TempDir(), "l.f32")
	for _, args := range [][]string{
		{"inspect", name},
		{"logits", "--model", name, "--tokens", "1,2,3", "--out", out},
		{"tokenize", "--model", name, "Hello"},
		{"quantize", name, filepath.Join(t.TempDir(), "q.gguf"), "--type", "q8_0", "--allow-requantize", "-q"},
		// chat: the Phi-3 fixtures carry a Jinja template, Qwen's are recognised by their tokens
		{"generate", "--model", "tiny-phi3-f32", "--chat", "--prompt", "Hi", "-n", "2"},
		{"generate", "--model", "tiny-qwen3-f32", "--chat", "--prompt", "Hi", "-n", "2"},
	} {
		if got, err := run(t, args...); err != nil {
			t.Errorf("%v: %v\n%s", args, err, got)
		}
	}
	for _, args := range [][]string{
		{"inspect", "no-such-model"},
		{"logits", "--model", "no-such-model", "--tokens", "1", "--out", out},
	} {
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "no fixture of that name") {
			t.Errorf("%v: %v, want a missing-model error naming fixtures", args, err)
		}
	}
}

func TestSeedFlag(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	base := []string{"generate", "--model", path, "--prompt", "Hello", "-n", "4", "--temperature", "0.8"}
	a, err := run(t, append(base, "--seed", "18446744073709551615")...)
	if err != nil {
		t.Fatal(err)
	}
	text := func(out string) string { return strings.SplitN(out, "\n", 2)[0] }
	if b, err := run(t, append(base, "--seed", "18446744073709551615")...); err != nil || text(b) != text(a) {
		t.Errorf("the same seed gave %q then %q (%v)", a, b, err)
	}
	out, err := run(t, append(base, "--seed", "-1")...)
	if err != nil || !regexp.MustCompile(`seed: \d+`).MatchString(out) {
		t.Errorf("--seed -1: %v\n%s", err, out)
	}
	for _, bad := range []string{"-2", "x", "18446744073709551616"} {
		_, err := run(t, append(base, "--seed", bad)...)
		if err == nil || !strings.Contains(err.Error(), "or -1 for a random seed") || strings.Contains(err.Error(), "strconv") {
			t.Errorf("--seed %s: %v", bad, err)
		}
	}
}

func TestQuantizeTypeNames(t *testing.T) {
	for _, name := range []string{"Q4_K_XL", "iq4_xs", "q9", "99"} {
		_, err := run(t, "quantize", "in.gguf", "out.gguf", "--type", name)
		if err == nil || !strings.Contains(err.Error(), "want one of F32 F16 BF16 Q4_0") || strings.Contains(err.Error(), "dtype:") {
			t.Errorf("--type %s: %v", name, err)
		}
	}
	for _, args := range [][]string{
		{"quantize", "in.gguf", "out.gguf"},
		{"quantize", "in.gguf", "out.gguf", "Q8_0", "--type", "Q8_0"},
		{"quantize", "in.gguf", "out.gguf", "Q8_0", "--output-tensor-type", "Q4_K_M"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestScheduleArguments(t *testing.T) {
	for _, bad := range [][]string{
		{"--bandwidth", "-4300"}, {"--bandwidth", "NaN"}, {"--sms", "-1"}, {"--parts", "guess"}, {"--card", "K80"}, {"--card", "nope"},
		{"--rows", "0"}, {"--context", "-1"}, {"--queues-per-sm", "0"}, {"--queues-per-sm", "9"}, {"--stage", "1000000"},
	} {
		if _, err := run(t, append([]string{"schedule", "--model", "no-model-needed"}, bad...)...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("schedule %v: %v", bad, err)
		}
	}
}

// verity schedule reports the modelled step with its breakdown, as text and as JSON.
func TestSchedule(t *testing.T) {
	path := tinyModel(t, "tiny-llama-bf16")
	out, err := run(t, "schedule", "--model", path, "--sms", "4", "--queues-per-sm", "2", "--context", "32")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"on 4 SMs × 2 queues", "modelled, not measured", "levels", "the floor is", "item starts", "hand-offs",
		"the critical path's parts by kernel: ", "matvec8_bf16_bf16", "what a waiting block stages"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	js, err := run(t, "schedule", "--model", path, "--sms", "4", "--json")
	if err != nil || !strings.Contains(js, `"critical_path"`) || !strings.Contains(js, `"levels"`) || !strings.Contains(js, `"stage_bytes"`) {
		t.Errorf("--json: %v\n%s", err, js)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "--version")
	if err != nil || !regexp.MustCompile(`^verity \S+.* \(go1\.\d+.* \S+/\S+, kernels [0-9a-f]{12}\)\n$`).MatchString(out) {
		t.Errorf("--version: %q, %v", out, err)
	}
}

// verity bench --protocol seed001 runs the seed's protocol at a reduced shape: the report has
// every call, the grade, the wrong variants and the decode check, and passes; bad settings
// are refused.
func TestBenchProtocolSeed001(t *testing.T) {
	out, err := run(t, "bench", "--protocol", "seed001", "--shape", "tiny", "--calls", "2", "--tree-seed", "9", "--threads", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"seed001 (megakernel-spec-decode-verify), tiny shape", "trees from seed 9", "verified positions/s",
		"of the floor", "— PASS", "causal triangle", "chain positions", "8 of 8 nodes — PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	js, err := run(t, "bench", "--protocol", "seed001", "--shape", "tiny", "--calls", "1", "--decode-calls", "0", "--json", "--megakernel", "--sms", "2")
	if err != nil || !strings.Contains(js, `"megakernel": true`) || !strings.Contains(js, `"wrong_caught"`) {
		t.Errorf("--json: %v\n%s", err, js)
	}
	for _, bad := range [][]string{{"--protocol", "seed002"}, {"--protocol", "seed001", "--shape", "huge"},
		{"--protocol", "seed001", "--calls", "0"}, {"--protocol", "seed001", "--shape", "tiny", "--calls", "1", "--decode-calls", "2"},
		{"--protocol", "seed001", "--backend", "cpu,cpu"}} {
		if _, err := run(t, append([]string{"bench"}, bad...)...); err == nil {
			t.Errorf("bench %v accepted", bad)
		}
	}
}

// verity kernels prints every kernel at the real model sizes with the model's prediction, on
// the H200 by default and the A100 with --sm 80, as a table or JSON.
func TestKernels(t *testing.T) {
	out, err := run(t, "kernels", "--match", "matvec_q4_K")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "H200: sm_90, 132 SMs") || !regexp.MustCompile(`matvec_q4_K_q8_K +llama-3.2-1b/ffn_up/rows=8192/cols=2048/n=1 +\d+ `).MatchString(out) {
		t.Errorf("kernels:\n%s", out)
	}
	out, err = run(t, "kernels", "--sm", "80", "--json", "--match", "rmsnorm_f32")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Card    struct{ Name string }
		Kernels []struct {
			Case    string  `json:"case"`
			Entry   string  `json:"entry"`
			TimeUS  float64 `json:"time_us"`
			Limiter string  `json:"limiter"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range got.Kernels {
		if k.Entry == "rmsnorm_f32" && k.Case != "" {
			found = k.TimeUS > 0 && k.Limiter != ""
		}
	}
	if got.Card.Name != "A100" || !found {
		t.Errorf("kernels --json: %+v", got)
	}
	if _, err := run(t, "kernels", "--sm", "75"); err == nil {
		t.Error("kernels --sm 75: no error")
	}
}

// serve refuses settings without a meaning before it loads anything (issue: --sessions -1
// printed a Go struct, --sessions 0 served, --step 0, --max-nodes -1 and --idle -1s passed).
func TestServeLimits(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	for _, c := range []struct{ flag, value, want string }{
		{"--sessions", "-1", "--sessions -1: want at least 1"},
		{"--sessions", "0", "--sessions 0: want at least 1"},
		{"--step", "0", "--step 0: want at least 2"},
		{"--max-nodes", "-1", "--max-nodes -1: want 0"},
		{"--max-nodes", "64", "at most --step − 1 = 63"},
		{"--idle", "-1s", "--idle -1s: want 0 (never)"},
		{"--context", "-5", "--context -5"},
		{"--queue", "-1", "--queue -1"},
		{"--grace", "-2s", "--grace -2s"},
		{"--max-body", "-1", "--max-body -1"},
	} {
		_, err := run(t, "serve", "--model", "no-such-model.gguf", c.flag, c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "{") {
			t.Errorf("serve %s %s: %v, want %q", c.flag, c.value, err, c.want)
		}
	}
}

// --plot draws bench's sweep and compare's bars as PNG or SVG files, and refuses other names
// before measuring anything.
func TestPlots(t *testing.T) {
	path := tinyModel(t, "tiny-llama-f32")
	dir := t.TempDir()
	args := []string{"bench", "-m", path, "-p", "8,16", "-n", "2", "-r", "2", "-t", "1", "--trees", "1", "--no-warmup", "--widths", "1,4"}
	rows := filepath.Join(dir, "rows.json")
	out, err := run(t, append(args, "-o", "json", "--plot", filepath.Join(dir, "sweep.png"))...)
	if err != nil || os.WriteFile(rows, []byte(out), 0o644) != nil {
		t.Fatal(err)
	}
	if _, err := run(t, append(args, "--plot", filepath.Join(dir, "sweep.svg"))...); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "compare", rows, rows, "--plot", filepath.Join(dir, "compare.png")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sweep.png", "compare.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 300 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sweep.svg")); err != nil || !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("t/s against the prompt length")) {
		t.Errorf("sweep.svg: %v", err)
	}
	if _, err := run(t, append(args, "--plot", filepath.Join(dir, "sweep.gif"))...); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("--plot sweep.gif: %v", err)
	}
}

// The rooflines: every kernel case (verity kernels --plot) and every launch of a step
// (verity schedule --plot), drawn from the static model without a GPU.
func TestRooflines(t *testing.T) {
	dir := t.TempDir()
	if _, err := run(t, "kernels", "--plot", filepath.Join(dir, "kernels.png")); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(tinyModel(t, "tiny-llama-q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exec.New(&planner{}, p, engine.ExecOptions(p, engine.LoadOptions{MaxRows: 8, Context: 136, Sessions: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if err := scheduleRoofline(filepath.Join(dir, "step.png"), "tiny-llama-q8_0", ex, 8, 128); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "schedule", "--model", "tiny-llama-q8_0", "--context", "64", "--plot", filepath.Join(dir, "schedule.svg")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kernels.png", "step.png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() < 10000 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if os.Getenv("VERITY_PLOTS") != "" { // keep them to look at
		for _, name := range []string{"kernels.png", "step.png"} {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			os.WriteFile(filepath.Join(os.Getenv("VERITY_PLOTS"), name), b, 0o644)
		}
	}
}
