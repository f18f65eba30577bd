package tokenizer

import "unicode/utf8"

// GPT-2's byte alphabet (bytes_to_unicode): the printable bytes '!'…'~', '¡'…'¬' and '®'…'ÿ'
// stand for themselves; the other 68 bytes, in increasing order, are U+0100, U+0101, ….
var byteRune, runeByte = func() ([256]rune, map[rune]byte) {
	var br [256]rune
	rb := make(map[rune]byte, 256)
	next := rune(256)
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			br[b] = rune(b)
		} else {
			br[b] = next
			next++
		}
		rb[br[b]] = byte(b)
	}
	return br, rb
}()

// byteText[b] is byte b spelled in GPT-2's alphabet.
var byteText = func() (t [256]string) {
	for b := range 256 {
		t[b] = string(byteRune[b])
	}
	return
}()

// spellBytes spells bytes in GPT-2's alphabet.
func spellBytes(b []byte) string {
	n := 0
	for _, c := range b {
		n += len(byteText[c])
	}
	out := make([]byte, 0, n)
	for _, c := range b {
		out = append(out, byteText[c]...)
	}
	return string(out)
}

// decodeBytes reads a token spelled in GPT-2's alphabet back to its bytes; a character outside
// the alphabet is kept as its UTF-8.
func decodeBytes(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// utf8Len is the length of a UTF-8 sequence from its first byte, as llama.cpp's
// unicode_len_utf8 reads it (a continuation byte counts as 1).
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

// decodeUTF8 decodes text to code points as llama.cpp's unicode_cpts_from_utf8 does: a byte
// that does not start a complete sequence (by the lead byte's length and continuation bytes
// alone) becomes U+FFFD and decoding resumes at the next byte; overlong forms and surrogates
// are accepted as they decode.
func decodeUTF8(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		n := 0
		switch {
		case c < 0x80:
			out = append(out, rune(c))
			i++
			continue
		case c&0x40 == 0: // a continuation byte
		case c&0x20 == 0:
			n = 2
		case c&0x10 == 0:
			n = 3
		case c&0x08 == 0:
			n = 4
		}
		if n == 0 || i+n > len(s) || !continuations(s[i+1:i+n]) {
			out = append(out, utf8.RuneError)
			i++
			continue
		}
		r := rune(c) & (0x7F >> n)
		for _, cc := range []byte(s[i+1 : i+n]) {
			r = r<<6 | rune(cc&0x3F)
		}
		out = append(out, r)
		i += n
	}
	return out
}

func continuations(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i]&0xC0 != 0x80 {
			return false
		}
	}
	return true
}

// encodeUTF8 encodes code points as llama.cpp's unicode_cpt_to_utf8 does: surrogates too
// (three bytes, as their numbers say); a number above U+10FFFF (which llama.cpp refuses)
// becomes U+FFFD.
func encodeUTF8(cpts []rune) []byte {
	out := make([]byte, 0, len(cpts))
	for _, r := range cpts {
		switch {
		case r < 0:
			out = utf8.AppendRune(out, utf8.RuneError)
		case r < 0x80:
			out = append(out, byte(r))
		case r < 0x800:
			out = append(out, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
		case r < 0x10000:
			out = append(out, 0xE0|byte(r>>12), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
		case r <= 0x10FFFF:
			out = append(out, 0xF0|byte(r>>18), 0x80|byte(r>>12&0x3F), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
		default:
			out = utf8.AppendRune(out, utf8.RuneError)
		}
	}
	return out
}
