package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
)

// testdata/llama-bench.* were written by llama.cpp's llama-bench itself (build de3ff81, CPU),
// on the small-llama-q4_k_m fixture copied to small-llama-q4_k_m.gguf:
//
//	llama-bench -m small-llama-q4_k_m.gguf -p 16 -n 4 -pg 16,4 -r 2 -t 1 -o FORMAT

// jsonShape is a JSON object's keys in order and the JSON type of each value (an integer
// literal is "int", any other number "real").
type jsonShape struct {
	keys  []string
	types map[string]string
}

func shapesOf(t *testing.T, data []byte) []jsonShape {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []jsonShape
	var cur *jsonShape
	depth := 0
	key := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				out = append(out, jsonShape{types: map[string]string{}})
				cur, depth, key = &out[len(out)-1], depth+1, ""
			case '[':
				if cur != nil && key != "" {
					cur.types[key], key = "array", ""
				}
				depth++
			case '}', ']':
				depth--
			}
		default:
			if cur == nil {
				continue
			}
			if key == "" {
				if s, ok := v.(string); ok {
					key = s
					cur.keys = append(cur.keys, s)
					continue
				}
				continue // an array's element
			}
			switch x := v.(type) {
			case string:
				cur.types[key] = "string"
			case bool:
				cur.types[key] = "bool"
			case json.Number:
				cur.types[key] = "real"
				if !strings.ContainsAny(x.String(), ".eE") {
					cur.types[key] = "int"
				}
			}
			key = ""
		}
	}
	return out
}

// verityTests measures the tiny fixture with two repetitions (llama-bench's testdata has two
// samples per test) and returns its rows, pg included.
func verityTests(t *testing.T) []Test {
	t.Helper()
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 16, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := Run(m.Engine, "tiny-llama-q8_0", 1e9, Options{Depth: 4, Prompt: 16, Decode: 4, Trees: 1, Repetitions: 2, NoWarmup: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Threads = 1
	ts := Tests(r, TestOptions{Model: DescribeModel("tiny-llama-q8_0.gguf", f), Backends: []string{"cpu (1 threads)"}, PG: true})
	if len(ts) != 4 {
		t.Fatalf("%d tests, want pp, tg, pg and tv", len(ts))
	}
	return ts
}

// Verity's rows have llama-bench's fields, in its order and with its JSON types, then
// Verity's own; every format lays them out as llama-bench does, and rows of both read back.
func TestLlamaBenchFields(t *testing.T) {
	ts := verityTests(t)
	for i, want := range []string{"pp16 @ d4", "tg4 @ d20", "pp16+tg4 @ d4", "tv8 @ d24"} {
		if got := ts[i].Name(); got != want {
			t.Errorf("test %d is %s, want %s", i, got, want)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/llama-bench." + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(format string) []byte {
		var b bytes.Buffer
		if err := WriteTests(&b, format, ts, "a footer"); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, format := range []string{"json", "jsonl"} {
		theirs, ours := shapesOf(t, read(format)), shapesOf(t, write(format))
		if len(theirs) != 3 || len(ours) != len(ts) {
			t.Fatalf("%s: %d and %d rows", format, len(theirs), len(ours))
		}
		lb := theirs[0]
		if want := append(LlamaBenchFields(), "samples_ns", "samples_ts"); !slices.Equal(lb.keys, want) {
			t.Errorf("llama-bench's %s fields %v, LlamaBenchFields %v", format, lb.keys, want)
		}
		for _, o := range ours {
			if !slices.Equal(o.keys[:len(lb.keys)], lb.keys) || !slices.Equal(o.keys[len(lb.keys):], VerityFields()) {
				t.Errorf("%s: fields %v", format, o.keys)
				continue
			}
			for _, k := range lb.keys {
				if o.types[k] != lb.types[k] && !(lb.types[k] == "int" && k == "n_gen") {
					t.Errorf("%s: %s is %s, llama-bench's %s", format, k, o.types[k], lb.types[k])
				}
			}
		}
		// the layout: every value replaced, llama-bench's row is the beginning of Verity's
		skeleton := func(b []byte) string {
			s := regexp.MustCompile(`"(?:[^"\\]|\\.)*":?`).ReplaceAllStringFunc(string(b), func(q string) string {
				if strings.HasSuffix(q, `":`) {
					return q // a key
				}
				return "S"
			})
			s = regexp.MustCompile(`-?[0-9][0-9.e+-]*|true|false`).ReplaceAllString(s, "V")
			end := strings.Index(s, `"samples_ts": [ V, V ]`)
			if end < 0 {
				t.Fatalf("%s: no samples_ts in %.300s", format, s)
			}
			return s[:end]
		}
		if a, b := skeleton(read(format)), skeleton(write(format)); a != b {
			t.Errorf("%s layout differs:\nllama-bench %q\nverity      %q", format, a, b)
		}
	}
	// csv: llama-bench's header, then Verity's columns; every value quoted
	lb := strings.SplitN(string(read("csv")), "\n", 2)[0]
	ours := strings.Split(string(write("csv")), "\n")
	if !strings.HasPrefix(ours[0], lb+",samples_ns,samples_ts,test,") || len(ours) != len(ts)+2 || !strings.HasPrefix(ours[1], `"`) {
		t.Errorf("csv header %q (llama-bench's %q)", ours[0], lb)
	}
	// sql: llama-bench's table as it creates it, and its insert's columns
	create := func(b []byte) string {
		s := string(b)
		return s[:strings.Index(s, ");\n")+3]
	}
	columns := func(b []byte) string {
		s := string(b)
		i := strings.Index(s, "INSERT INTO llama_bench (")
		return s[i : i+strings.Index(s[i:], ")")]
	}
	if sql := write("sql"); create(sql) != create(read("sql")) || columns(sql) != columns(read("sql")) ||
		!bytes.Contains(sql, []byte("CREATE TABLE IF NOT EXISTS verity_tests (\n  build_commit TEXT,")) {
		t.Errorf("sql:\n%s", sql)
	}
	// md: llama-bench's columns as far as its own go, then Verity's
	lbLines := strings.Split(string(read("md")), "\n")
	md := strings.Split(string(write("md")), "\n")
	cut := func(line string) string { return line[:strings.Index(line, "threads |")+len("threads |")] }
	if cut(md[0]) != cut(lbLines[0]) || md[1][:len(cut(lbLines[1]))] != cut(lbLines[1]) ||
		!strings.Contains(md[0], "|            test |                  t/s |") || !strings.HasPrefix(md[len(ts)+3], "build: ") {
		t.Errorf("md:\n%s", strings.Join(md, "\n"))
	}
	// both read back, llama-bench's and Verity's
	for _, format := range []string{"json", "jsonl"} {
		theirs, err := ReadTests(bytes.NewReader(read(format)))
		if err != nil || len(theirs) != 3 || theirs[2].Name() != "pp16+tg4" || theirs[0].Model != "small-llama-q4_k_m.gguf" || len(theirs[1].SamplesTS) != 2 {
			t.Errorf("llama-bench's %s read back: %v, %+v", format, err, theirs)
		}
		ours, err := ReadTests(bytes.NewReader(write(format)))
		if err != nil || len(ours) != len(ts) || ours[3].Name() != "tv8 @ d24" || math.Abs(ours[3].AvgTS-ts[3].AvgTS) > 1e-5 {
			t.Errorf("verity's %s read back: %v, %+v", format, err, ours)
		}
	}
}

// DescribeModel gives a file llama.cpp's description, size and parameter count, as
// llama-bench wrote them for the same file.
func TestDescribeModel(t *testing.T) {
	f, err := fixtures.Parse("small-llama-q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := ReadTests(bytes.NewReader(must(os.ReadFile("testdata/llama-bench.json"))))
	if err != nil {
		t.Fatal(err)
	}
	got := DescribeModel("x.gguf", f)
	if lb := theirs[0]; got.Type != lb.ModelType || got.Size != lb.ModelSize || got.NParams != lb.ModelNParams {
		t.Errorf("described as %+v, llama-bench: %q, %d bytes, %d parameters", got, lb.ModelType, lb.ModelSize, lb.ModelNParams)
	}
	for _, c := range []struct {
		arch          string
		layers        int
		embd, experts int64
		want          string
	}{
		{"llama", 16, 2048, 0, "1B"}, {"llama", 32, 4096, 8, "8x7B"}, {"qwen3", 28, 1024, 0, "0.6B"}, {"phi3", 32, 3072, 0, "3B"}, {"llama", 4, 256, 0, "?B"},
	} {
		if got := sizeClass(c.arch, c.layers, c.embd, 32, 8, c.experts, 128256); got != c.want {
			t.Errorf("%s with %d layers: %s, want %s", c.arch, c.layers, got, c.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
