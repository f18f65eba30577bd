package serve

import (
	"fmt"
	"math"
	"sync"

	"verity/host/tokenizer"
)

// JSON mode (Sampler.JSON, OpenAI's response_format {"type": "json_object"}): the target
// samples only among the tokens whose text continues a JSON object (RFC 8259, UTF-8), and once
// the object is closed only among the end-of-generation tokens. The restriction is a function
// of the tokens emitted so far, applied to the logits before the sampler — the same at a
// position whether it is decoded or verified as a draft node — so verified sessions still emit
// exactly what plain decoding with the same sampler emits. Runs of whitespace are limited to
// maxJSONSpace bytes and nesting to maxJSONDepth, so a model cannot stall in them.

const (
	maxJSONDepth = 64
	maxJSONSpace = 16
)

// jsonMode is where a jsonState is in the text.
type jsonMode uint8

const (
	jStart     jsonMode = iota // before the top-level object: whitespace, then '{'
	jValue                     // a value is expected (after ':' or ',' in an array)
	jArrStart                  // after '[': a value or ']'
	jObjStart                  // after '{': a key or '}'
	jKey                       // after ',' in an object: a key
	jColon                     // after a key: ':'
	jAfter                     // after a value: ',' or the container's close
	jString                    // inside a string (jsonState.key: an object key)
	jEscape                    // after '\' in a string
	jHex                       // in a \uXXXX escape (jsonState.n hex digits still to come)
	jUTF8                      // in a multi-byte UTF-8 character (jsonState.n bytes to come)
	jLiteral                   // in true, false or null (jsonState.lit, jsonState.n bytes read)
	jMinus                     // after a number's '-'
	jZero                      // after a number's leading 0
	jInt                       // in a number's integer digits
	jDot                       // after '.'
	jFrac                      // in the fraction digits
	jExp                       // after 'e' or 'E'
	jExpSign                   // after the exponent's sign
	jExpDigits                 // in the exponent digits
	jDone                      // the top-level object is closed
)

// jsonState is a byte-level JSON recogniser's state: a small value, copied to try a token.
type jsonState struct {
	mode   jsonMode
	key    bool   // the string being read is an object key
	n      uint8  // jHex, jUTF8, jLiteral: see jsonMode
	lit    uint8  // jLiteral: 0 true, 1 false, 2 null
	lo, hi byte   // jUTF8: the range of the next continuation byte
	space  uint8  // whitespace bytes in the current run
	depth  uint8  // open containers
	stack  uint64 // bit d: container d is an object (else an array)
}

var jsonLiterals = [3]string{"true", "false", "null"}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// top reports whether the innermost open container is an object.
func (s *jsonState) top() bool { return s.stack>>(s.depth-1)&1 == 1 }

// open pushes a container; false past maxJSONDepth.
func (s *jsonState) open(object bool) bool {
	if s.depth == maxJSONDepth {
		return false
	}
	if object {
		s.stack |= 1 << s.depth
		s.mode = jObjStart
	} else {
		s.stack &^= 1 << s.depth
		s.mode = jArrStart
	}
	s.depth++
	return true
}

// close pops the innermost container if close is its closing byte.
func (s *jsonState) close(c byte) bool {
	if s.depth == 0 || (c == '}') != s.top() {
		return false
	}
	s.depth--
	s.mode = jAfter
	if s.depth == 0 {
		s.mode = jDone
	}
	return true
}

// value starts a value with byte b (the caller skipped whitespace).
func (s *jsonState) value(b byte) bool {
	switch {
	case b == '{':
		return s.open(true)
	case b == '[':
		return s.open(false)
	case b == '"':
		s.mode, s.key = jString, false
	case b == 't':
		s.mode, s.n, s.lit = jLiteral, 1, 0
	case b == 'f':
		s.mode, s.n, s.lit = jLiteral, 1, 1
	case b == 'n':
		s.mode, s.n, s.lit = jLiteral, 1, 2
	case b == '-':
		s.mode = jMinus
	default:
		return s.digits(b)
	}
	return true
}

// digits starts a number's integer digits with b (0 stands alone).
func (s *jsonState) digits(b byte) bool {
	switch {
	case b == '0':
		s.mode = jZero
	case isDigit(b):
		s.mode = jInt
	default:
		return false
	}
	return true
}

// feed advances the state over byte b; false if no JSON object text continues with it (the
// state is then unspecified).
func (s *jsonState) feed(b byte) bool {
	switch s.mode {
	case jString, jEscape, jHex, jUTF8, jLiteral, jMinus, jZero, jInt, jDot, jFrac, jExp, jExpSign, jExpDigits:
		s.space = 0
	default:
		if isSpace(b) {
			s.space++
			return s.space <= maxJSONSpace
		}
		s.space = 0
	}
	switch s.mode {
	case jStart:
		return b == '{' && s.open(true)
	case jValue:
		return s.value(b)
	case jArrStart:
		if b == ']' {
			return s.close(b)
		}
		return s.value(b)
	case jObjStart, jKey:
		if b == '}' && s.mode == jObjStart {
			return s.close(b)
		}
		if b != '"' {
			return false
		}
		s.mode, s.key = jString, true
		return true
	case jColon:
		if b != ':' {
			return false
		}
		s.mode = jValue
		return true
	case jAfter:
		switch b {
		case ',':
			if s.top() {
				s.mode = jKey
			} else {
				s.mode = jValue
			}
			return true
		case '}', ']':
			return s.close(b)
		}
		return false
	case jString:
		switch {
		case b == '"':
			if s.key {
				s.mode = jColon
			} else {
				s.mode = jAfter
			}
		case b == '\\':
			s.mode = jEscape
		case b < 0x20:
			return false
		case b < 0x80:
		case b >= 0xc2 && b <= 0xdf:
			s.mode, s.n, s.lo, s.hi = jUTF8, 1, 0x80, 0xbf
		case b >= 0xe0 && b <= 0xef:
			s.mode, s.n, s.lo, s.hi = jUTF8, 2, 0x80, 0xbf
			if b == 0xe0 {
				s.lo = 0xa0 // no overlong forms
			} else if b == 0xed {
				s.hi = 0x9f // no surrogates
			}
		case b >= 0xf0 && b <= 0xf4:
			s.mode, s.n, s.lo, s.hi = jUTF8, 3, 0x80, 0xbf
			if b == 0xf0 {
				s.lo = 0x90
			} else if b == 0xf4 {
				s.hi = 0x8f // nothing past U+10FFFF
			}
		default:
			return false
		}
		return true
	case jUTF8:
		if b < s.lo || b > s.hi {
			return false
		}
		s.lo, s.hi = 0x80, 0xbf
		if s.n--; s.n == 0 {
			s.mode = jString
		}
		return true
	case jEscape:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.mode = jString
		case 'u':
			s.mode, s.n = jHex, 4
		default:
			return false
		}
		return true
	case jHex:
		if !isDigit(b) && !(b >= 'a' && b <= 'f') && !(b >= 'A' && b <= 'F') {
			return false
		}
		if s.n--; s.n == 0 {
			s.mode = jString
		}
		return true
	case jLiteral:
		w := jsonLiterals[s.lit]
		if b != w[s.n] {
			return false
		}
		if s.n++; int(s.n) == len(w) {
			s.mode = jAfter
		}
		return true
	case jMinus:
		return s.digits(b)
	case jZero, jInt, jFrac, jExpDigits:
		switch {
		case isDigit(b) && s.mode != jZero:
			return true
		case (b == '.') && (s.mode == jZero || s.mode == jInt):
			s.mode = jDot
			return true
		case (b == 'e' || b == 'E') && s.mode != jExpDigits:
			s.mode = jExp
			return true
		}
		s.mode = jAfter // the number ends here; b is what follows it
		return s.feed(b)
	case jDot:
		if !isDigit(b) {
			return false
		}
		s.mode = jFrac
		return true
	case jExp:
		switch {
		case b == '+' || b == '-':
			s.mode = jExpSign
		case isDigit(b):
			s.mode = jExpDigits
		default:
			return false
		}
		return true
	case jExpSign:
		if !isDigit(b) {
			return false
		}
		s.mode = jExpDigits
		return true
	}
	return false // jDone: nothing follows the object
}

// feedAll advances the state over text; false if it does not continue a JSON object.
func (s *jsonState) feedAll(text []byte) bool {
	for _, b := range text {
		if !s.feed(b) {
			return false
		}
	}
	return true
}

// jsonVocab is what JSON mode needs of a tokenizer: every token's text and which tokens end
// generation.
type jsonVocab struct {
	pieces [][]byte // nil for a token with no text of its own (control tokens)
	eog    []bool
	// plain marks the tokens whose text a string can hold as it is (printable ASCII other than
	// '"' and '\'): inside a string they are allowed without running the recogniser
	plain []bool
}

func isPlain(p []byte) bool {
	for _, b := range p {
		if b < 0x20 || b >= 0x7f || b == '"' || b == '\\' {
			return false
		}
	}
	return len(p) > 0
}

var jsonVocabs sync.Map // *tokenizer.Tokenizer → *jsonVocab

func jsonVocabOf(tk *tokenizer.Tokenizer) *jsonVocab {
	if v, ok := jsonVocabs.Load(tk); ok {
		return v.(*jsonVocab)
	}
	n := tk.NVocab()
	v := &jsonVocab{pieces: make([][]byte, n), eog: make([]bool, n), plain: make([]bool, n)}
	for id := range n {
		// an end-of-generation token is allowed only once the object is closed, whatever its
		// text; control tokens never before then
		if v.eog[id] = tk.IsEOG(int32(id)); v.eog[id] {
			continue
		}
		if _, typ, err := tk.Token(int32(id)); err != nil || typ == tokenizer.TypeControl {
			continue
		}
		if p, err := tk.Piece(int32(id), false); err == nil && len(p) > 0 {
			v.pieces[id], v.plain[id] = p, isPlain(p)
		}
	}
	actual, _ := jsonVocabs.LoadOrStore(tk, v)
	return actual.(*jsonVocab)
}

// errNoJSONToken: no token of the vocabulary continues the text as JSON.
var errNoJSONToken = fmt.Errorf("%w: JSON mode: no token of the model's vocabulary continues the JSON text", ErrBad)

// mask returns a copy of logits with −Inf for every token that cannot follow state st: while
// the object is open, those whose text does not continue it; once it is closed, all but the
// end-of-generation tokens. Logits beyond the tokenizer's vocabulary (a model's padded rows)
// have no text and are masked.
func (v *jsonVocab) mask(logits []float32, st jsonState) ([]float32, error) {
	out := make([]float32, len(logits))
	for id := len(v.pieces); id < len(logits); id++ {
		out[id] = float32(math.Inf(-1))
	}
	// the bytes that can come next: a token whose first byte cannot is refused at once
	var first [256]bool
	for b := range 256 {
		t := st
		first[b] = st.mode != jDone && t.feed(byte(b))
	}
	allowed := 0
	ninf := float32(math.Inf(-1))
	for id, p := range v.pieces[:min(len(v.pieces), len(logits))] {
		ok := false
		switch {
		case st.mode == jDone:
			ok = v.eog[id]
		case st.mode == jString && v.plain[id]:
			ok = true
		case p != nil && first[p[0]]:
			t := st
			ok = t.feedAll(p)
		}
		if ok {
			out[id] = logits[id]
			allowed++
		} else {
			out[id] = ninf
		}
	}
	if allowed == 0 {
		return nil, errNoJSONToken
	}
	return out, nil
}

// advance is st after token tok (which mask allowed).
func (v *jsonVocab) advance(st jsonState, tok int32) jsonState {
	if st.mode != jDone {
		st.feedAll(v.pieces[tok])
	}
	return st
}
