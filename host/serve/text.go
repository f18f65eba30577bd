package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"verity/host/tokenizer"
)

// ErrStop, returned by a completion's emit function, ends the completion as finished
// ("stop"), as an end-of-generation token does: what a TextStream's stop string asks for.
var ErrStop = errors.New("serve: stop")

// Stop strings' limits: OpenAI's four, with room to spare, and a length no token text needs.
const (
	MaxStops      = 16
	MaxStopLength = 256
)

// CheckStops reports stop strings a TextStream does not take: more than MaxStops, an empty
// one, one longer than MaxStopLength bytes, or one that is not UTF-8.
func CheckStops(stops []string) error {
	if len(stops) > MaxStops {
		return fmt.Errorf("%d stop strings, at most %d", len(stops), MaxStops)
	}
	for _, s := range stops {
		if s == "" || len(s) > MaxStopLength || !utf8.ValidString(s) {
			return fmt.Errorf("stop string %q: want 1 … %d bytes of UTF-8", s, MaxStopLength)
		}
	}
	return nil
}

// TextStream turns generated tokens into the text a reader sees, as they come: each token's
// piece, an end-of-generation token as nothing; released in whole UTF-8 characters only (a
// character split across tokens waits for its last byte; bytes that can never complete one
// go out as they are); and cut before the first occurrence of any stop string — a tail that
// could begin one is held back until a later token settles it. An echoed prompt (Echo) comes
// first; stop strings are looked for only after it.
type TextStream struct {
	tk      *tokenizer.Tokenizer
	stops   [][]byte
	all     []byte  // the text so far
	sent    int     // bytes of all released
	pending []Piece // tokens not yet released, in order
	stopped bool
	ended   bool // by an end-of-generation token
	chars   charCounter
	gen     int // where the generated text begins in all (after an echoed prompt)
}

// Piece is a generated token as the text shows it.
type Piece struct {
	Token
	Bytes []byte // the token's text: part of a character, possibly, or nothing
	// Offset is where Bytes begin in the text, in characters (for bytes that continue a
	// character, that character's).
	Offset int
	start  int // in bytes
}

// NewTextStream returns a stream over tk's pieces that ends at the first of stops (which
// CheckStops accepts; none: only the end of generation ends it).
func NewTextStream(tk *tokenizer.Tokenizer, stops []string) *TextStream {
	s := &TextStream{tk: tk}
	for _, st := range stops {
		s.stops = append(s.stops, []byte(st))
	}
	return s
}

// Echo puts a prompt's tokens before the generated ones: their texts (special tokens
// written out, so that the text and the tokens agree) are released as Add releases text, but
// no stop string is looked for in them. It returns the text released and the tokens.
func (s *TextStream) Echo(toks []Token) (string, []Piece) {
	for _, t := range toks {
		p, _ := s.tk.Piece(t.ID, true) // the ids have been checked against the vocabulary
		s.pending = append(s.pending, Piece{Token: t, Bytes: p, start: len(s.all)})
		s.all = append(s.all, p...)
	}
	s.gen = len(s.all)
	return s.release(s.charTail())
}

// Add takes the next generated token. It returns the text the token releases and the tokens
// whose text begins in it (a token without text goes with the first release at or after its
// place), and whether a stop string has ended the text: the text then ends before it, the
// tokens that only made up the stop string (or followed it) are left out, and generation
// should stop. An end-of-generation token ends the text: it adds none but is shown, after
// everything held back (which it releases), at the text's end, with its special text as its
// bytes; tokens after it are ignored.
func (s *TextStream) Add(t Token) (string, []Piece, bool) {
	if s.stopped {
		return "", nil, true
	}
	if s.ended {
		return "", nil, false
	}
	// A token beyond the tokenizer's vocabulary (a model's padded rows) has no text.
	p, _ := s.tk.Piece(t.ID, true)
	if s.tk.IsEOG(t.ID) {
		s.ended = true
		text, pieces := s.release(len(s.all))
		eog := Piece{Token: t, Bytes: p, start: len(s.all)}
		eog.Offset = s.chars.at(s.all, eog.start)
		return text, append(pieces, eog), false
	}
	s.pending = append(s.pending, Piece{Token: t, Bytes: p, start: len(s.all)})
	s.all = append(s.all, p...)

	// The earliest stop string in the unreleased generated text ends it. (None can begin in
	// released text: a tail that could begin one is never released.)
	from := max(s.sent, s.gen)
	cut := len(s.all)
	for _, st := range s.stops {
		if i := bytes.Index(s.all[from:], st); i >= 0 && from+i < cut {
			cut, s.stopped = from+i, true
		}
	}
	if !s.stopped {
		cut = min(s.stopTail(), s.charTail())
	}
	text, pieces := s.release(cut)
	if s.stopped {
		s.pending = nil
	}
	return text, pieces, s.stopped
}

// End releases what is held back, at the end of generation (nothing after a stop string).
func (s *TextStream) End() (string, []Piece) {
	if s.stopped {
		return "", nil
	}
	return s.release(len(s.all))
}

// stopTail is where the longest tail of the unreleased text that begins some stop string
// starts (len(all) when none does).
func (s *TextStream) stopTail() int {
	for i := max(s.sent, s.gen); i < len(s.all); i++ {
		for _, st := range s.stops {
			if len(st) > len(s.all)-i && bytes.HasPrefix(st, s.all[i:]) {
				return i
			}
		}
	}
	return len(s.all)
}

// charTail is where a character the text ends in the middle of begins (len(all) when it ends
// whole, or in bytes that can never complete one).
func (s *TextStream) charTail() int {
	for i := len(s.all) - 1; i >= s.sent && i >= len(s.all)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(s.all[i]) {
			if !utf8.FullRune(s.all[i:]) {
				return i
			}
			break
		}
	}
	return len(s.all)
}

// release sends the text up to cut and the pending tokens whose text begins before it.
func (s *TextStream) release(cut int) (string, []Piece) {
	text := string(s.all[s.sent:cut])
	s.sent = cut
	n := 0
	for n < len(s.pending) && (s.pending[n].start < cut || len(s.pending[n].Bytes) == 0 && s.pending[n].start == cut && !s.stopped) {
		p := &s.pending[n]
		p.Offset = s.chars.at(s.all, p.start)
		n++
	}
	out := s.pending[:n:n]
	s.pending = s.pending[n:]
	return text, out
}

// stopsOf reads OpenAI's stop field: absent, null, a string or an array of strings ("" and []
// mean none).
func stopsOf(raw []byte) ([]string, error) {
	v := strings.TrimSpace(string(raw))
	if v == "" || v == "null" || v == `""` {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, CheckStops([]string{one})
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("stop: want a string or an array of strings")
	}
	return many, CheckStops(many)
}

// charCounter converts increasing byte offsets into a growing text to offsets in characters,
// counting each byte once.
type charCounter struct {
	at0, n int // text[:at0] holds n characters (at0 at a character's start)
}

// at returns the offset in characters of the character that holds text[i] (i = len(text):
// the end), for i no less than at's last argument. A byte that continues no character (as
// UTF-8 decoding sees it) is a character of its own, as JSON's U+FFFD replaces it.
func (c *charCounter) at(text []byte, i int) int {
	k := i // back to the start of its character, if it continues one
	if i < len(text) && !utf8.RuneStart(text[i]) {
		for j := i - 1; j >= c.at0 && j > i-utf8.UTFMax; j-- {
			if utf8.RuneStart(text[j]) {
				if r, n := utf8.DecodeRune(text[j:]); !(r == utf8.RuneError && n == 1) && j+n > i {
					k = j
				}
				break
			}
		}
	}
	if k > c.at0 {
		c.n += utf8.RuneCount(text[c.at0:k])
		c.at0 = k
	}
	return c.n
}
