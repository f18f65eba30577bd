package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"verity/bench"
	"verity/fixtures"
)

// readmeSlow are the README's examples that take more than a few seconds on a 2-core machine
// (the PTX interpreter, every fixture, long prompts, 64 sessions): they run with
// VERITY_README=all, else they are skipped with their reason.
var readmeSlow = map[string]string{
	"verity check":                                                   "every golden fixture on the twins (TestCheck checks two)",
	"verity check --megakernel":                                      "every golden fixture through the megakernel's Go VM",
	"verity check --backend ptxvm tiny-llama-q8_0":                   "the PTX interpreter (TestCheck runs it)",
	"verity check --backend ptxvm-weak --megakernel tiny-llama-q8_0": "the weak-memory PTX interpreter (TestCheckWeak runs it)",
	"verity bench --prompt 128,2048 --decode 32 --threads 1,2":       "2048-token prompts at two thread counts (TestBenchSweep sweeps)",
	"verity bench --batch 1,4,16,64":                                 "64 sessions at once",
	"verity bench --peer llama-bench -r 5":                           "llama-bench and Verity interleaved, five rounds",
}

// readmeGPU marks the examples that need a GPU.
func readmeGPU(args []string) bool {
	for i, a := range args {
		if (a == "--backend" && i+1 < len(args) && strings.HasPrefix(args[i+1], "cuda")) || strings.HasPrefix(a, "--backend=cuda") {
			return true
		}
	}
	return false
}

// shellWords splits a command line as sh does for the README's examples: words separated by
// blanks, '…', "…" and $'…' quoting (with \n and \t), backslash escapes, a # word starting a
// comment. It returns the words before a pipe and what follows it.
func shellWords(line string) (words []string, pipe string, err error) {
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			return words, "", nil
		case c == '|':
			flush()
			return words, strings.TrimSpace(line[i+1:]), nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", errors.New("unclosed '")
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '$' && i+1 < len(line) && line[i+1] == '\'':
			j := strings.IndexByte(line[i+2:], '\'')
			if j < 0 {
				return nil, "", errors.New("unclosed $'")
			}
			cur.WriteString(strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(line[i+2 : i+2+j]))
			inWord, i = true, i+2+j
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, "", errors.New(`unclosed "`)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord, i = true, i+1
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, "", nil
}

// readmeExample is one command of the README's shell blocks, with the line after it when the
// block is a transcript ("$ verity …" and what it printed).
type readmeExample struct {
	line, printed string
}

func readmeExamples(t *testing.T) []readmeExample {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeExample
	inSh := false
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "```sh"):
			inSh = true
		case strings.HasPrefix(l, "```"):
			inSh = false
		case inSh:
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "$ ") {
				printed := ""
				if i+1 < len(lines) {
					printed = lines[i+1]
				}
				out = append(out, readmeExample{strings.TrimPrefix(l, "$ "), printed})
			} else if strings.HasPrefix(l, "verity ") || strings.HasPrefix(l, "go run ./tools/verity ") {
				out = append(out, readmeExample{line: l})
			}
		}
	}
	return out
}

// Every command of the README's shell blocks runs as written: its placeholder files are small
// fixtures and files made for it, the Llama-3.2-1B fixtures are the small llama's, and each
// runs in-process and must succeed (or, in a transcript, fail as printed). GPU examples and a
// server that runs until stopped are skipped with the reason; the slow ones (readmeSlow) too,
// unless VERITY_README=all.
func TestREADMEExamples(t *testing.T) {
	dir := t.TempDir()
	fixture := func(name string) string {
		s, err := fixtures.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := fixtures.SpecPath(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	model := fixture("tiny-phi3-q8_0") // a tokenizer and a chat template
	spec, _ := fixtures.Lookup("tiny-phi3-q8_0")
	ad, err := fixtures.LookupAdapter("lora-r8")
	if err != nil {
		t.Fatal(err)
	}
	adapter, err := fixtures.AdapterPath(spec, ad)
	if err != nil {
		t.Fatal(err)
	}
	tmp := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, text string) string {
		if err := os.WriteFile(tmp(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return tmp(name)
	}
	files := map[string]string{
		"m.gguf": model, "model.gguf": model, "in.gguf": fixture("tiny-llama-f32"), "a.gguf": adapter,
		"t.jinja":      write("t.jinja", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"),
		"chat.json":    write("chat.json", `[{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]`),
		"base.f32":     tmp("f16kv.f32"), // the logits examples of tokens 1,2,3 write them first
		"new.f32":      tmp("l.f32"),
		"before.jsonl": tmp("before.jsonl"), "after.jsonl": tmp("after.jsonl"),
		"llama-1b-q4_k_m": "small-llama-q4_k_m", "llama-1b-bf16": "tiny-llama-bf16",
	}
	for _, name := range []string{"before.jsonl", "after.jsonl"} {
		out, err := run(t, "bench", "-m", "tiny-llama-q8_0", "-p", "8", "-n", "4", "-r", "2", "--trees", "1", "-o", "jsonl")
		if err != nil || os.WriteFile(files[name], []byte(out), 0o644) != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	all := os.Getenv("VERITY_README") == "all"
	ran := 0
	start := time.Now()
	for _, ex := range readmeExamples(t) {
		words, pipe, err := shellWords(ex.line)
		if err != nil {
			t.Errorf("%s: %v", ex.line, err)
			continue
		}
		if words[0] == "go" { // go run ./tools/verity ARGS
			words = append([]string{"verity"}, words[3:]...)
		}
		key := strings.Join(words, " ")
		switch {
		case readmeGPU(words):
			t.Logf("skipped (needs a GPU): %s", ex.line)
			continue
		case len(words) > 1 && words[1] == "serve" && ex.printed == "":
			t.Logf("skipped (a server that runs until stopped; TestServeLoad drives one): %s", ex.line)
			continue
		case readmeSlow[key] != "" && !all:
			t.Logf("skipped (slow: %s; VERITY_README=all runs it): %s", readmeSlow[key], ex.line)
			continue
		}
		if key == "verity bench --peer llama-bench -r 5" {
			if _, err := bench.FindLlamaBench("llama-bench"); err != nil {
				t.Logf("skipped (no llama-bench here): %s", ex.line)
				continue
			}
		}
		args := words[1:]
		for i, a := range args {
			name, scale, _ := strings.Cut(a, ":")
			if f, ok := files[name]; ok {
				args[i] = f
				if scale != "" {
					args[i] += ":" + scale
				}
			} else if !strings.Contains(a, "/") && (strings.HasSuffix(a, ".gguf") || strings.HasSuffix(a, ".f32") || strings.HasSuffix(a, ".json") ||
				strings.HasSuffix(a, ".pprof") || strings.HasSuffix(a, ".db") || strings.HasSuffix(a, ".svg") || strings.HasSuffix(a, ".png")) {
				args[i] = tmp(a) // an output file
			}
		}
		t0 := time.Now()
		out, err := run(t, args...)
		ran++
		switch {
		case ex.printed != "": // a transcript: the error it printed
			want, _, _ := strings.Cut(strings.TrimPrefix(ex.printed, "verity: "), ":")
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: %v, the README prints %q", ex.line, err, ex.printed)
			}
		case err != nil:
			t.Errorf("%s: %v\n%s", ex.line, err, out)
		case pipe != "" && strings.HasPrefix(pipe, "sqlite3") && !strings.HasPrefix(out, "CREATE TABLE"):
			t.Errorf("%s: no SQL for %s", ex.line, pipe)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Logf("%.1f s: %s", d.Seconds(), ex.line)
		}
	}
	if ran < 30 {
		t.Errorf("ran %d of the README's examples; its shell blocks have moved?", ran)
	}
	t.Logf("%d examples in %.1f s", ran, time.Since(start).Seconds())
}
