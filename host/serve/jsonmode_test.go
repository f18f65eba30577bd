package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/tokenizer"
)

// jsonAccepts feeds text to a fresh recogniser: whether every byte was accepted, and whether
// the object is then closed.
func jsonAccepts(text []byte) (ok, done bool) {
	var st jsonState
	ok = st.feedAll(text)
	return ok, ok && st.mode == jDone
}

func TestJSONState(t *testing.T) {
	for _, tc := range []struct {
		text     string
		ok, done bool
	}{
		{`{}`, true, true},
		{` {"a": 1}`, true, true},
		{`{"a": [1, -2.5e+3, 0, 0.0, 1E9, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9", {}, [], [[]]]}`, true, true},
		{`{"naïve 日本 🙂": {"k": "v"}}`, true, true},
		{`{"a"`, true, false},
		{`{"a": 12`, true, false}, // a number may go on
		{`{"a": tr`, true, false},
		{`{"a": "\u00`, true, false},
		{`[]`, false, false}, // the top level is an object
		{`"x"`, false, false},
		{`{"a": 1,}`, false, false},
		{`{,}`, false, false},
		{`{"a" 1}`, false, false},
		{`{"a": 01}`, false, false},
		{`{"a": 1.}`, false, false},
		{`{"a": .5}`, false, false},
		{`{"a": -}`, false, false},
		{`{"a": 1e}`, false, false},
		{`{"a": +1}`, false, false},
		{`{"a": tru}`, false, false},
		{`{"a": nul1}`, false, false},
		{`{"a": "x\q"}`, false, false},
		{`{"a": "\u12g4"}`, false, false},
		{"{\"a\": \"\x01\"}", false, false},
		{"{\"a\": \"\xc3\"}", false, false},         // a truncated character
		{"{\"a\": \"\xe0\x80\x80\"}", false, false}, // overlong
		{"{\"a\": \"\xed\xa0\x80\"}", false, false}, // a surrogate
		{"{\"a\": \"\xf4\x90\x80\x80\"}", false, false},
		{`{"a": [1}`, false, false},
		{`{"a": {]}`, false, false},
		{`{} `, true, true},
		{`{}x`, false, false},
		{`{}{}`, false, false},
		{"{" + strings.Repeat(" ", maxJSONSpace) + "}", true, true},
		{"{" + strings.Repeat(" ", maxJSONSpace+1) + "}", false, false},
		{`{"a":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + "}", true, true},
		{`{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + "}", false, false},
	} {
		ok, done := jsonAccepts([]byte(tc.text))
		if ok != tc.ok || done != tc.done {
			t.Errorf("%q: accepted %v, closed %v; want %v, %v", tc.text, ok, done, tc.ok, tc.done)
		}
	}
}

// randomJSON is a seeded random JSON value (an object at the top).
func randomJSON(r *rand.Rand, depth int) any {
	if depth == 0 || r.IntN(3) == 0 {
		switch r.IntN(6) {
		case 0:
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6))
		case 1:
			return r.IntN(2000) - 1000
		case 2:
			return r.IntN(2) == 0
		case 3:
			return nil
		default:
			words := []string{"a", "é", "日本", "🙂", "\"", "\\", "\n", "\u0001", "</x>", " "}
			var b strings.Builder
			for range r.IntN(5) {
				b.WriteString(words[r.IntN(len(words))])
			}
			return b.String()
		}
	}
	if r.IntN(2) == 0 {
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomJSON(r, depth-1)
		}
		return a
	}
	m := map[string]any{}
	for range r.IntN(4) {
		m[string(rune('a'+r.IntN(26)))] = randomJSON(r, depth-1)
	}
	return m
}

// Every object encoding/json writes, compact or indented, is accepted and closed.
func TestJSONStateAcceptsEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		obj := map[string]any{"k": randomJSON(r, 5), "n": i}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, "", " "); err != nil {
			t.Fatal(err)
		}
		for _, text := range [][]byte{b, ind.Bytes()} {
			if ok, done := jsonAccepts(text); !ok || !done {
				t.Fatalf("%s: accepted %v, closed %v", text, ok, done)
			}
		}
	}
}

// FuzzJSONState: the recogniser closes exactly the texts that are one valid JSON object in
// valid UTF-8 (within its whitespace and depth limits), and accepts every prefix of those.
func FuzzJSONState(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, 2.5e-3, "x\u00e9"]}`, `{"a": {"b": null}} `, `[1]`, `{"a": 01}`, "{\"\xff\": 1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		ok, done := jsonAccepts(text)
		valid := json.Valid(text) && utf8.Valid(text) && bytes.HasPrefix(bytes.TrimLeft(text, " \t\r\n"), []byte("{"))
		if done && !valid {
			t.Fatalf("%q closed but is not a valid JSON object", text)
		}
		if valid && !done && withinLimits(text) {
			t.Fatalf("%q is a valid JSON object but accepted %v, closed %v", text, ok, done)
		}
		if valid && withinLimits(text) {
			for i := range text {
				if ok, _ := jsonAccepts(text[:i]); !ok {
					t.Fatalf("prefix %q of valid %q refused", text[:i], text)
				}
			}
		}
	})
}

// withinLimits: no whitespace run outside strings longer than maxJSONSpace and no nesting
// deeper than maxJSONDepth (estimated over the whole text, strings included: conservative).
func withinLimits(text []byte) bool {
	run, depth, inString, esc := 0, 0, false, false
	for _, b := range text {
		switch {
		case inString:
			if esc {
				esc = false
			} else if b == '\\' {
				esc = true
			} else if b == '"' {
				inString = false
			}
			continue
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
		if isSpace(b) {
			run++
		} else {
			run = 0
		}
		if run > maxJSONSpace || depth > maxJSONDepth {
			return false
		}
	}
	return true
}

// BenchmarkJSONMask masks a 128256-token vocabulary (Llama 3's size; pieces of 1 to 8 bytes
// drawn from JSON's and English's characters) in three states: inside a string (most tokens
// pass the first-byte check), after a value, and before a key.
func BenchmarkJSONMask(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	const alphabet = ` abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789{}[]":,.-_\n`
	v := &jsonVocab{pieces: make([][]byte, 128256), eog: make([]bool, 128256), plain: make([]bool, 128256)}
	for i := range v.pieces {
		p := make([]byte, 1+r.IntN(8))
		for j := range p {
			p[j] = alphabet[r.IntN(len(alphabet))]
		}
		v.pieces[i], v.plain[i] = p, isPlain(p)
	}
	logits := make([]float32, len(v.pieces))
	for _, tc := range []struct{ name, text string }{{"string", `{"key": "some te`}, {"after", `{"a": [1, 2`}, {"key", `{"a": 1, `}} {
		var st jsonState
		if !st.feedAll([]byte(tc.text)) {
			b.Fatalf("%q refused", tc.text)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.mask(logits, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// mask allows exactly the tokens whose whole text the recogniser accepts (the end-of-generation
// ones only once the object is closed), whatever its shortcuts, at states along random objects.
func TestJSONMask(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const alphabet = " \n\t{}[]\":,.-+eE0123456789abcdefnrtlsu\\/é日🙂\x01\xff"
	n := 3000
	v := &jsonVocab{pieces: make([][]byte, n), eog: make([]bool, n), plain: make([]bool, n)}
	for i := 2; i < n; i++ { // token 0 ends generation, token 1 has no text
		var p []byte
		for range 1 + r.IntN(6) {
			p = append(p, alphabet[r.IntN(len(alphabet))])
		}
		v.pieces[i], v.plain[i] = p, isPlain(p)
	}
	v.eog[0] = true
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	for doc := range 200 {
		text, _ := json.Marshal(map[string]any{"k": randomJSON(r, 4)})
		var st jsonState
		for i := 0; i <= len(text); i++ {
			if i > 0 && !st.feed(text[i-1]) {
				t.Fatalf("%q refused at %d", text, i-1)
			}
			if r.IntN(4) > 0 && i < len(text) {
				continue
			}
			got, err := v.mask(logits, st)
			if err != nil {
				t.Fatalf("doc %d, %q: %v", doc, text[:i], err)
			}
			for id, p := range v.pieces {
				want := st.mode == jDone && v.eog[id]
				if st.mode != jDone && p != nil {
					c := st
					want = c.feedAll(p)
				}
				if allowed := !math.IsInf(float64(got[id]), -1); allowed != want {
					t.Fatalf("after %q: token %d %q allowed %v, want %v", text[:i], id, p, allowed, want)
				}
				if want && got[id] != logits[id] {
					t.Fatalf("token %d's logit changed", id)
				}
			}
		}
	}
}

// An end-of-generation token that is not a control token (here eot_token_id names the byte
// token "a") is allowed only once the object is closed, not wherever its text would fit.
func TestJSONModeTextualEOG(t *testing.T) {
	b, err := fixtures.Bytes("tiny-qwen3-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	w.Set("tokenizer.ggml.eot_token_id", gguf.U32('a'))
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.Load(g)
	if err != nil {
		t.Fatal(err)
	}
	if !tk.IsEOG('a') {
		t.Fatal("the rewritten vocabulary's eot token is not an end-of-generation token")
	}
	v := jsonVocabOf(tk)
	logits := make([]float32, tk.NVocab())
	for _, text := range []string{`{"k": "`, `{`, `{"k": 1`, `{}`} {
		var st jsonState
		st.feedAll([]byte(text))
		l, err := v.mask(logits, st)
		if err != nil {
			t.Fatal(err)
		}
		if allowed := !math.IsInf(float64(l['a']), -1); allowed != (st.mode == jDone) {
			t.Errorf("after %q the end-of-generation token \"a\" is allowed: %v", text, allowed)
		}
	}
}

// A text no token can continue, met at a drafted node, ends the round as plain decoding does:
// the drafted token is emitted as the next token, and the following round fails.
func TestJSONModeDeadEnd(t *testing.T) {
	f, err := fixtures.Parse("tiny-qwen3-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(2), engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n := m.Engine.Program().Config.NVocab
	// a vocabulary of two texts: X opens an object and a member, Y begins a \u escape that no
	// token finishes
	tk := &tokenizer.Tokenizer{}
	v := &jsonVocab{pieces: make([][]byte, n), eog: make([]bool, n), plain: make([]bool, n)}
	const X, Y = 10, 11
	v.pieces[X], v.pieces[Y] = []byte(`{"k":1,`), []byte(`"\u`)
	jsonVocabs.Store(tk, v)
	defer jsonVocabs.Delete(tk)
	sv := New(m.Engine, Options{Tokenizer: tk})
	defer sv.Shutdown()
	smp := Sampler{JSON: true}
	for _, draft := range [][]int32{nil, {Y}} {
		op, err := sv.Open([]int32{1, 2, 3}, smp)
		if err != nil || op.Next.ID != X {
			t.Fatalf("open: %+v, %v", op, err)
		}
		d := Draft{Position: op.Position, Tokens: draft}
		for range draft {
			d.Parents = append(d.Parents, -1)
		}
		r, err := sv.Verify(op.Session, d)
		if err != nil || r.Next.ID != Y || len(r.Tokens) != 0 || r.Position != op.Position+1 {
			t.Fatalf("draft %v: %+v, %v; want Y as the next token", draft, r, err)
		}
		if _, err := sv.Verify(op.Session, Draft{Position: r.Position}); !errors.Is(err, ErrBad) {
			t.Errorf("draft %v: after Y: %v, want the dead end's error", draft, err)
		}
		// the failed round left the session where it was
		if r2, err := sv.Verify(op.Session, Draft{Position: r.Position}); !errors.Is(err, ErrBad) || r2.Position != 0 {
			t.Errorf("draft %v: a second try: %+v, %v", draft, r2, err)
		}
	}
}
