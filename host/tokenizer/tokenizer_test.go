package tokenizer

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"verity/host/gguf"
)

// sanitized is text as the tokenizer reads it: llama.cpp's UTF-8 decoding, re-encoded.
func sanitized(s string) string { return string(encodeUTF8(decodeUTF8(s))) }

// TestRoundTrip: decoding the ids gives the text back, with special tokens written as text when
// they were parsed. Byte-level BPE reads malformed UTF-8 as llama.cpp does (U+FFFD); SentencePiece
// passes only valid UTF-8 through (llama.cpp's SPM cuts malformed text by lead bytes alone, so
// a stray lead byte swallows the "▁" of a following space, which then decodes as itself).
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	texts := append([]string{}, corpus...)
	for range 200 {
		texts = append(texts, randomText(rng, 1+rng.IntN(64)))
	}
	for _, v := range vocabularies {
		tk := fixtureTokenizer(t, v.arch, v.n)
		for _, text := range texts {
			if tk.spm != nil && !utf8.ValidString(text) {
				continue
			}
			for _, parse := range []bool{false, true} {
				ids := tk.Encode(text, Options{AddSpecial: true, ParseSpecial: parse})
				for _, id := range ids {
					if id < 0 || int(id) >= tk.NVocab() {
						t.Fatalf("%s: id %d outside the vocabulary", v.fixture, id)
					}
				}
				got, err := tk.Decode(ids, parse)
				if err != nil {
					t.Fatal(err)
				}
				want := sanitized(text)
				if parse && tk.addBOS {
					want = tk.tokens[tk.bos] + want
				}
				if got != want {
					t.Errorf("%s parse_special=%v: %q decodes to %q", v.fixture, parse, text, got)
				}
			}
		}
	}
}

// randomText mixes ASCII, whitespace, multi-byte characters, special-token texts and stray bytes.
func randomText(rng *rand.Rand, n int) string {
	parts := []string{"a", "Z", "9", " ", "  ", "\n", "\r\n", "\t", "'s", "'LL", ".", "!?", "é", "e\u0301",
		"日本", "😀", "\u00a0", "<|im_start|>", "<|end_of_text|>", "\xff", "\xc3", "\xe2\x82", "hello", "world"}
	var b strings.Builder
	for range n {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func TestSpecialTokens(t *testing.T) {
	tk := fixtureTokenizer(t, "qwen35moe", 1024)
	start, _ := tk.lookup("<|im_start|>")
	end, _ := tk.lookup("<|im_end|>")
	text := "<|im_start|>user\nhi<|im_end|>"
	parsed := tk.Encode(text, Options{ParseSpecial: true})
	if parsed[0] != start || parsed[len(parsed)-1] != end {
		t.Errorf("parsed: %v does not start with %d and end with %d", parsed, start, end)
	}
	plain := tk.Encode(text, Options{})
	for _, id := range plain {
		if id == start || id == end {
			t.Errorf("unparsed: special token %d in %v", id, plain)
		}
	}
	// Control tokens decode to nothing unless asked for.
	if p, _ := tk.Piece(start, false); len(p) != 0 {
		t.Errorf("Piece(<|im_start|>, false) = %q", p)
	}
	if p, _ := tk.Piece(start, true); string(p) != "<|im_start|>" {
		t.Errorf("Piece(<|im_start|>, true) = %q", p)
	}
	if _, err := tk.Piece(int32(tk.NVocab()), false); err == nil {
		t.Error("Piece of an id outside the vocabulary: no error")
	}
	// Qwen adds no BOS; Llama 3 does.
	if ids := tk.Encode("x", Options{AddSpecial: true}); len(ids) != 1 {
		t.Errorf("qwen35: %v", ids)
	}
	ll := fixtureTokenizer(t, "llama", 1024)
	if ids := ll.Encode("x", Options{AddSpecial: true}); len(ids) != 2 || ids[0] != ll.BOS() {
		t.Errorf("llama: %v, BOS %d", ids, ll.BOS())
	}
}

func (t *Tokenizer) lookup(s string) (int32, bool) {
	id, ok := t.index[s]
	return id, ok
}

// TestMalformedUTF8 follows llama.cpp's decoder on its own boundaries.
func TestMalformedUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []rune
	}{
		{"a", []rune{'a'}},
		{"\x80", []rune{utf8.RuneError}},                                         // a lone continuation byte
		{"\xc3", []rune{utf8.RuneError}},                                         // truncated
		{"\xc3(", []rune{utf8.RuneError, '('}},                                   // bad continuation: resume at the next byte
		{"\xc0\xaf", []rune{'/'}},                                                // overlong, accepted
		{"\xed\xa0\x80", []rune{0xD800}},                                         // a surrogate, accepted
		{"\xf4\x90\x80\x80", []rune{0x110000}},                                   // beyond U+10FFFF decodes …
		{"\xf8\x88\x80\x80\x80", []rune{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}}, // no 5-byte forms
		{"é", []rune{'é'}},
	} {
		got := decodeUTF8(tc.in)
		if string(got) != string(tc.want) || len(got) != len(tc.want) {
			t.Errorf("decodeUTF8(%q) = %U, want %U", tc.in, got, tc.want)
		}
	}
	// … and is encoded as U+FFFD (llama.cpp aborts there).
	if got := encodeUTF8([]rune{0x110000, 0xD800, -1}); !bytes.Equal(got, []byte("\uFFFD\xed\xa0\x80\uFFFD")) {
		t.Errorf("encodeUTF8 = %q", got)
	}
	tk := fixtureTokenizer(t, "llama", 1024)
	if ids := tk.Encode("\xf4\x90\x80\x80", Options{}); len(ids) == 0 {
		t.Error("no tokens for a code point beyond U+10FFFF")
	}
}

func TestByteAlphabet(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteRune[b]
		if seen[r] {
			t.Fatalf("byte %d: %U twice", b, r)
		}
		seen[r] = true
		if runeByte[r] != byte(b) {
			t.Fatalf("byte %d → %U → %d", b, r, runeByte[r])
		}
	}
	if byteText[' '] != "Ġ" || byteText['\n'] != "Ċ" || byteText['a'] != "a" || byteText[0xAD] != "Ń" {
		t.Errorf("space %q, newline %q, a %q, 0xAD %q", byteText[' '], byteText['\n'], byteText['a'], byteText[0xAD])
	}
}

// vocabFile writes a GGUF holding only the given tokenizer keys.
func vocabFile(t *testing.T, kv map[string]gguf.Value) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		w.Set(k, v)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadErrors(t *testing.T) {
	base := func() map[string]gguf.Value {
		return map[string]gguf.Value{
			"tokenizer.ggml.model":      gguf.Str("gpt2"),
			"tokenizer.ggml.pre":        gguf.Str("qwen2"),
			"tokenizer.ggml.tokens":     gguf.ArrStrings([]string{"a", "b", "ab", "<s>"}),
			"tokenizer.ggml.token_type": gguf.ArrInt32s([]int32{1, 1, 1, 3}),
			"tokenizer.ggml.merges":     gguf.ArrStrings([]string{"a b"}),
		}
	}
	for _, tc := range []struct {
		name   string
		change func(map[string]gguf.Value)
		want   string
	}{
		{"no model", func(m map[string]gguf.Value) { delete(m, "tokenizer.ggml.model") }, "tokenizer.ggml.model"},
		{"bert", func(m map[string]gguf.Value) { m["tokenizer.ggml.model"] = gguf.Str("bert") }, `"bert" is not supported`},
		{"spm scores", func(m map[string]gguf.Value) { m["tokenizer.ggml.model"] = gguf.Str("llama") }, `needs its scores`},
		{"spm score count", func(m map[string]gguf.Value) {
			m["tokenizer.ggml.model"] = gguf.Str("llama")
			m["tokenizer.ggml.scores"] = gguf.ArrFloat32s([]float32{1})
		}, `1 scores for 4 tokens`},
		{"pre", func(m map[string]gguf.Value) { m["tokenizer.ggml.pre"] = gguf.Str("klingon") }, `pre-tokenizer "klingon" is not supported`},
		{"no tokens", func(m map[string]gguf.Value) { delete(m, "tokenizer.ggml.tokens") }, "tokenizer.ggml.tokens"},
		{"empty", func(m map[string]gguf.Value) { m["tokenizer.ggml.tokens"] = gguf.ArrStrings(nil) }, "holds 0 tokens"},
		{"types", func(m map[string]gguf.Value) { m["tokenizer.ggml.token_type"] = gguf.ArrInt32s([]int32{1}) }, "1 token types for 4 tokens"},
		{"no merges", func(m map[string]gguf.Value) { delete(m, "tokenizer.ggml.merges") }, "needs its merges"},
		{"bos", func(m map[string]gguf.Value) { m["tokenizer.ggml.bos_token_id"] = gguf.U32(4) }, "outside the vocabulary"},
		{"add bos", func(m map[string]gguf.Value) { m["tokenizer.ggml.add_bos_token"] = gguf.Bool(true) }, "names none"},
		{"bos type", func(m map[string]gguf.Value) { m["tokenizer.ggml.bos_token_id"] = gguf.Str("3") }, "bos_token_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := base()
			tc.change(kv)
			_, err := Load(vocabFile(t, kv))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	tk, err := Load(vocabFile(t, base()))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("abab", Options{}); len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Errorf("Encode(abab) = %v, want [2 2]", got)
	}
	// A character with no token falls back to its bytes' tokens (none here), as llama.cpp does.
	if got := tk.Encode("abc", Options{}); len(got) != 1 || got[0] != 2 {
		t.Errorf("Encode(abc) = %v, want [2]", got)
	}
}

// FuzzEncode: any text encodes to ids inside the vocabulary that decode to the text as read.
func FuzzEncode(f *testing.F) {
	for _, s := range corpus {
		f.Add(s, false)
	}
	f.Add("<|im_start|>\xff<|im_end|>", true)
	f.Fuzz(func(t *testing.T, text string, parse bool) {
		if len(text) > 1024 {
			// Long texts are TestLongTexts' job; here they would only slow the fuzzer (an
			// interesting input is minimised one byte at a time).
			t.Skip()
		}
		tk := fixtureTokenizer(t, "qwen35moe", 1024)
		ids := tk.Encode(text, Options{AddSpecial: true, ParseSpecial: parse})
		got, err := tk.Decode(ids, parse)
		if err != nil {
			t.Fatal(err)
		}
		if want := sanitized(text); got != want {
			t.Errorf("%q decodes to %q, want %q", text, got, want)
		}
		sp := fixtureTokenizer(t, "spm", 0)
		ids = sp.Encode(text, Options{ParseSpecial: parse})
		if got, err = sp.Decode(ids, parse); err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(text) && got != text {
			t.Errorf("SentencePiece: %q decodes to %q", text, got)
		}
	})
}

// SentencePiece: a space before the text, spaces as "▁", byte tokens for characters without a
// piece, and Decode taking the added space off again.
func TestSentencePiece(t *testing.T) {
	tk := fixtureTokenizer(t, "spm", 0)
	ids := tk.Encode("Hello world, ça va?", Options{AddSpecial: true})
	var pieces []string
	for _, id := range ids {
		s, _, _ := tk.Token(id)
		pieces = append(pieces, s)
	}
	want := []string{"<s>", "▁Hello", "▁w", "or", "ld", ",", "▁", "<0xC3>", "<0xA7>", "a", "▁", "v", "a", "<0x3F>"}
	if !slices.Equal(pieces, want) {
		t.Errorf("pieces %q, want %q", pieces, want)
	}
	if s, err := tk.Decode(ids, false); err != nil || s != "Hello world, ça va?" {
		t.Errorf("Decode = %q, %v", s, err)
	}
	// After a special token the next piece gets its space again, and loses it in Decode.
	ids = tk.Encode("</s>Hello", Options{ParseSpecial: true})
	if len(ids) != 2 || ids[0] != tk.EOS() {
		t.Errorf("</s>Hello: %v", ids)
	}
	if s, _ := tk.Decode(ids, true); s != "</s>Hello" {
		t.Errorf("Decode = %q", s)
	}
	if p, _ := tk.Piece(ids[1], false); string(p) != " Hello" {
		t.Errorf("Piece = %q", p)
	}
}

// No token covers more than MaxPieceBytes of text, so a text encodes to at least
// len/MaxPieceBytes tokens.
func TestMaxPieceBytes(t *testing.T) {
	for _, v := range vocabularies {
		tk := fixtureTokenizer(t, v.arch, v.n, v.pre)
		for _, text := range corpus {
			for _, parse := range []bool{false, true} {
				if n := len(tk.Encode(text, Options{ParseSpecial: parse})); n*tk.MaxPieceBytes() < len(text) {
					t.Errorf("%s: %q in %d tokens of at most %d bytes", tk, text, n, tk.MaxPieceBytes())
				}
			}
		}
	}
}

// TestLongTexts: long runs of one character class — the pre-tokenizers' backtracking cases
// (whitespace runs before text and at the end), one huge word, malformed bytes — encode and
// decode back on both tokenizer models.
func TestLongTexts(t *testing.T) {
	for _, tk := range []*Tokenizer{fixtureTokenizer(t, "qwen35moe", 1024), fixtureTokenizer(t, "spm", 0)} {
		for _, text := range []string{
			strings.Repeat(" ", 20000) + "x", strings.Repeat(" ", 20000), strings.Repeat("\n ", 10000),
			strings.Repeat("z", 20000), strings.Repeat("(", 20000), strings.Repeat("9", 20000),
			strings.Repeat("\xfd", 5000) + "(zzz c    \xfd", strings.Repeat("é", 10000), strings.Repeat("<|im_end|>", 2000),
		} {
			ids := tk.Encode(text, Options{ParseSpecial: true})
			got, err := tk.Decode(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			want := text
			if tk.spm == nil {
				want = sanitized(text)
			}
			if tk.spm == nil || utf8.ValidString(text) {
				if got != want {
					t.Errorf("%s: %q… (%d bytes) does not decode back", tk, text[:8], len(text))
				}
			}
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	tk := fixtureTokenizer(b, "llama", 128256)
	text := strings.Repeat(corpus[3]+" "+corpus[13]+" "+corpus[15]+"\n", 64)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tk.Encode(text, Options{AddSpecial: true})
	}
}

// End-of-generation tokens: EOS and the tokens spelled like an end of turn, which become
// CONTROL tokens (parsed only with ParseSpecial) whatever type the file gives them.
func TestEOG(t *testing.T) {
	q := fixtureTokenizer(t, "qwen35moe", 1024)
	for _, text := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := q.lookup(text); !ok || !q.IsEOG(id) {
			t.Errorf("%s: id %d, EOG %v", text, id, q.IsEOG(id))
		}
	}
	if id, _ := q.lookup("<|im_start|>"); q.IsEOG(id) {
		t.Error("<|im_start|> ends generation")
	}
	tk, err := Load(vocabFile(t, map[string]gguf.Value{
		"tokenizer.ggml.model":      gguf.Str("gpt2"),
		"tokenizer.ggml.pre":        gguf.Str("qwen2"),
		"tokenizer.ggml.tokens":     gguf.ArrStrings([]string{"a", "<|eot_id|>"}),
		"tokenizer.ggml.token_type": gguf.ArrInt32s([]int32{1, 1}),
		"tokenizer.ggml.merges":     gguf.ArrStrings(nil),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !tk.IsEOG(1) || tk.types[1] != TypeControl {
		t.Errorf("<|eot_id|>: EOG %v, type %d", tk.IsEOG(1), tk.types[1])
	}
	if got := tk.Encode("<|eot_id|>", Options{ParseSpecial: true}); !slices.Equal(got, []int32{1}) {
		t.Errorf("parsed: %v", got)
	}
	if got := tk.Encode("a<|eot_id|>", Options{}); slices.Contains(got, 1) {
		t.Errorf("unparsed: %v", got)
	}
}

// Every pre-tokenizer's expressions compile and split a mixed text into pieces that put it
// back together.
func TestPreTokenizersCompile(t *testing.T) {
	const text = "Hello, WORLD! parseJSON 1234 ünïcode 日本語 x\r\n  y\tz 'll 𐐀"
	for name := range preTokenizers {
		b, err := newBPE(name, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var joined []rune
		for _, w := range b.split([]rune(text)) {
			joined = append(joined, w...)
		}
		if string(joined) != text {
			t.Errorf("%s: the words %q do not make up the text", name, string(joined))
		}
	}
}

// No pre-tokenizer's expressions backtrack badly: long runs of letters in alternating case,
// digits, spaces, punctuation and CJK split in well under the search timeout, and the words
// make up the text.
func TestPreTokenizersLongRuns(t *testing.T) {
	runs := []string{
		strings.Repeat("aB", 10000), strings.Repeat("Ab", 10000), strings.Repeat("9", 20000),
		strings.Repeat(" ", 20000) + "x", strings.Repeat("!?", 10000), strings.Repeat("日本", 10000),
		strings.Repeat("\r\n", 10000), strings.Repeat("a'", 10000),
	}
	for _, name := range slices.Sorted(maps.Keys(preTokenizers)) {
		b, err := newBPE(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range runs {
			start := time.Now()
			var n int
			for _, w := range b.split([]rune(text)) {
				n += len(w)
			}
			if el := time.Since(start); n != len([]rune(text)) || el > 2*time.Second {
				t.Errorf("%s on %.10q…: %d of %d characters in %v", name, text, n, len([]rune(text)), el)
			}
		}
	}
}

// In a model named Phi-3 (general.name, any case), special tokens other than <unk>, <s> and
// <|endoftext|> swallow the whitespace after them when parsed, as llama.cpp's token attributes
// make them; in other models they do not. (The ids equal llama.cpp's on the phi3 fixtures.)
func TestPhi3SpecialTokensStripRight(t *testing.T) {
	// (normal tokens in GPT-2's byte alphabet: Ġ is a space, Ċ a newline, ĉ a tab)
	tokens := []string{"<unk>", "<s>", "</s>", "<|endoftext|>", "<|user|>", "<|end|>", "Ġ", "Ċ", "a", "b", "ĉ"}
	types := []int32{TypeUnknown, TypeControl, TypeControl, TypeControl, TypeUserDefined, TypeControl, 1, 1, 1, 1, 1}
	load := func(name string) *Tokenizer {
		tk, err := Load(vocabFile(t, map[string]gguf.Value{
			"general.name":                 gguf.Str(name),
			"tokenizer.ggml.model":         gguf.Str("gpt2"),
			"tokenizer.ggml.pre":           gguf.Str("llama-bpe"),
			"tokenizer.ggml.tokens":        gguf.ArrStrings(tokens),
			"tokenizer.ggml.token_type":    gguf.ArrInt32s(types),
			"tokenizer.ggml.merges":        gguf.ArrStrings(nil),
			"tokenizer.ggml.add_bos_token": gguf.Bool(false),
		}))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	phi, other := load("Phi-3-mini-4k-instruct"), load("tiny-llama")
	o := Options{ParseSpecial: true}
	for _, tc := range []struct{ text, stripped string }{
		{"<|user|>\n a<|end|>\t\nb", "<|user|>a<|end|>b"},
		{"</s>  a", "</s>a"},
		{"<s> a<unk> b<|endoftext|> a", "<s> a<unk> b<|endoftext|> a"}, // these keep theirs
	} {
		if got, want := phi.Encode(tc.text, o), other.Encode(tc.stripped, o); !slices.Equal(got, want) {
			t.Errorf("Phi-3: %q → %v, want %v (as %q)", tc.text, got, want, tc.stripped)
		}
		if tc.text != tc.stripped && slices.Equal(other.Encode(tc.text, o), phi.Encode(tc.text, o)) {
			t.Errorf("another model strips %q too", tc.text)
		}
	}
}
