package serve_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"verity/host/serve"
	"verity/host/tokenizer"
)

// byteTokens maps each byte to a token whose text is that byte alone, and lists some tokens
// whose texts are short runs of the given letters.
func byteTokens(t *testing.T, tk *tokenizer.Tokenizer, letters string) (map[byte]int32, []int32) {
	t.Helper()
	single := map[byte]int32{}
	var runs []int32
	for id := int32(0); int(id) < tk.NVocab(); id++ {
		p, err := tk.Piece(id, true)
		if err != nil || tk.IsEOG(id) {
			continue
		}
		if len(p) == 1 {
			if _, ok := single[p[0]]; !ok {
				single[p[0]] = id
			}
		} else if len(p) > 1 && len(p) <= 4 && strings.Trim(string(p), letters) == "" {
			runs = append(runs, id)
		}
	}
	if len(single) < 256 {
		t.Fatalf("the vocabulary has single-byte tokens for %d bytes, want 256", len(single))
	}
	return single, runs
}

// stream feeds ids to a TextStream and returns the text, the tokens shown and whether (after
// which token) a stop string ended it; it checks that every release is whole UTF-8 when the
// text is.
func stream(t *testing.T, tk *tokenizer.Tokenizer, stops []string, ids []int32, valid bool) (string, []serve.Piece, int) {
	t.Helper()
	s := serve.NewTextStream(tk, stops)
	var out strings.Builder
	var shown []serve.Piece
	for i, id := range ids {
		text, pieces, stopped := s.Add(serve.Token{ID: id})
		if valid && !utf8.ValidString(text) {
			t.Fatalf("a release %q is not whole UTF-8", text)
		}
		out.WriteString(text)
		shown = append(shown, pieces...)
		if stopped {
			return out.String(), shown, i
		}
	}
	text, pieces := s.End()
	out.WriteString(text)
	return out.String(), append(shown, pieces...), -1
}

// stopReference is what a stream of tokens with texts shows: after each token, the text up to
// the earliest start of a stop string in it, if one has appeared; it returns that text and the
// token after which it stopped (−1: none did).
func stopReference(texts, stops []string) (string, int) {
	full := ""
	for i, p := range texts {
		full += p
		cut := -1
		for _, st := range stops {
			if j := strings.Index(full, st); j >= 0 && (cut < 0 || j < cut) {
				cut = j
			}
		}
		if cut >= 0 {
			return full[:cut], i
		}
	}
	return full, -1
}

// Without stop strings the stream's text is the tokens' decoded text, released in whole
// characters however a character's bytes are split across tokens; each token is shown once,
// at the offset in characters where its text begins (a byte that continues a character: that
// character's; a stray byte is a character of its own, as JSON replaces it), the
// end-of-generation token last, at the end, with its special text.
func TestTextStreamCharacters(t *testing.T) {
	tk := fixtureTokenizer(t, "tiny-llama-q8_0")
	single, _ := byteTokens(t, tk, "")
	// chars gives each byte of text the start of the character that holds it, as UTF-8
	// decoding (and JSON) sees the characters.
	chars := func(text string) (starts []int) {
		for i := 0; i < len(text); {
			_, n := utf8.DecodeRuneInString(text[i:])
			for range n {
				starts = append(starts, i)
			}
			i += n
		}
		return starts
	}
	for _, text := range []string{"aé😀b", "日本語", "\x81stray\xffbytes", "end in a lead \xe2\x82", "\xe2\x82\xac\xac", "ok", ""} {
		var ids []int32
		for i := 0; i < len(text); i++ {
			ids = append(ids, single[text[i]])
		}
		ids = append(ids, tk.EOS())
		got, shown, stop := stream(t, tk, nil, ids, utf8.ValidString(text))
		if got != text || stop != -1 || len(shown) != len(ids) {
			t.Fatalf("%q: text %q, %d tokens shown, stopped at %d", text, got, len(shown), stop)
		}
		starts := chars(text)
		for i, p := range shown {
			want := utf8.RuneCountInString(text) // the end-of-generation token
			if i < len(text) {
				want = utf8.RuneCountInString(text[:starts[i]])
			}
			if p.Offset != want || p.ID != ids[i] {
				t.Errorf("%q: token %d shown as %+v, want offset %d", text, i, p, want)
			}
		}
		if eos, _ := tk.Piece(tk.EOS(), true); string(shown[len(text)].Bytes) != string(eos) {
			t.Errorf("%q: the end-of-generation token shown as %q", text, shown[len(text)].Bytes)
		}
	}
}

// The text ends before the first stop string to appear as the tokens come (the one that
// begins first, among those the same token completes), the tokens shown are those whose text
// begins before it, and nothing is released that a later token could make part of one.
func TestTextStreamStops(t *testing.T) {
	tk := fixtureTokenizer(t, "tiny-llama-q8_0")
	const letters = "abc"
	single, runs := byteTokens(t, tk, letters)
	for _, c := range letters {
		runs = append(runs, single[byte(c)])
	}
	r := rand.New(rand.NewPCG(7, 7))
	stopped := 0
	for trial := 0; trial < 2000; trial++ {
		var stops []string
		for range 1 + r.IntN(3) {
			n := 1 + r.IntN(4)
			var b []byte
			for range n {
				b = append(b, letters[r.IntN(len(letters))])
			}
			stops = append(stops, string(b))
		}
		var ids []int32
		var texts []string
		for range r.IntN(12) {
			id := runs[r.IntN(len(runs))]
			p, _ := tk.Piece(id, true)
			ids, texts = append(ids, id), append(texts, string(p))
		}
		want, wantStop := stopReference(texts, stops)
		got, shown, stop := stream(t, tk, stops, ids, true)
		if got != want || stop != wantStop {
			t.Fatalf("stops %q, tokens %q: %q stopped at %d, want %q at %d", stops, texts, got, stop, want, wantStop)
		}
		var starts []int32
		at := 0
		for i, p := range texts {
			if wantStop >= 0 && (i > wantStop || at >= len(want)) {
				break
			}
			starts = append(starts, ids[i])
			at += len(p)
		}
		ids2 := make([]int32, len(shown))
		for i, p := range shown {
			ids2[i] = p.ID
		}
		if !slices.Equal(ids2, starts) {
			t.Fatalf("stops %q, tokens %q: shown %v, want %v", stops, texts, ids2, starts)
		}
		if wantStop >= 0 {
			stopped++
		}
	}
	if stopped < 500 {
		t.Errorf("only %d of 2000 trials met a stop string", stopped)
	}
	for _, bad := range [][]string{{""}, {strings.Repeat("x", serve.MaxStopLength+1)}, make([]string, serve.MaxStops+1)} {
		if serve.CheckStops(bad) == nil {
			t.Errorf("stops %q accepted", bad)
		}
	}
}

// Any tokens and stop strings: the stream's text is the reference's — the decoded text (up to
// an end-of-generation token, which ends it) cut at the earliest stop string in the text as it
// stands after the token that completes the first one — and it stops after that token.
func FuzzTextStream(f *testing.F) {
	f.Add("ab\x00b", []byte{1, 2, 3, 4, 5, 6})
	f.Add("\n", []byte{200, 1, 17, 9})
	f.Add("é\x00\xe2", []byte{0, 255, 3, 128, 64})
	tk := fixtureTokenizer(f, "tiny-llama-q8_0")
	f.Fuzz(func(t *testing.T, stopText string, raw []byte) {
		var stops []string
		for _, s := range strings.Split(stopText, "\x00") {
			if s != "" && len(s) <= serve.MaxStopLength && len(stops) < serve.MaxStops {
				stops = append(stops, s)
			}
		}
		var ids []int32
		for i := 0; i+1 < len(raw) && len(ids) < 64; i += 2 {
			ids = append(ids, int32(int(raw[i])<<8|int(raw[i+1]))%int32(tk.NVocab()))
		}
		var texts []string // up to an end-of-generation token, which ends the text
		for _, id := range ids {
			if tk.IsEOG(id) {
				break
			}
			p, _ := tk.Piece(id, true)
			texts = append(texts, string(p))
		}
		want, wantStop := stopReference(texts, stops)
		got, _, stop := stream(t, tk, stops, ids, false)
		if got != want || stop != wantStop {
			t.Fatalf("stops %q, ids %v: %q stopped at %d, want %q at %d", stops, ids, got, stop, want, wantStop)
		}
	})
}
