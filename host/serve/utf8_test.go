package serve

import (
	"testing"
	"unicode/utf8"
)

// utf8Buffer returns only whole characters however the bytes are split, and loses nothing.
func TestUTF8Buffer(t *testing.T) {
	for _, text := range []string{"aé😀b", "日本語", "\x81stray\xffbytes", "end in a lead \xe2\x82", "ok"} {
		for step := 1; step <= 4; step++ {
			var u utf8Buffer
			var out string
			for i := 0; i < len(text); i += step {
				s := u.add([]byte(text[i:min(i+step, len(text))]))
				if utf8.ValidString(text) && !utf8.ValidString(s) {
					t.Errorf("%q by %d: a piece %q is not whole UTF-8", text, step, s)
				}
				out += s
			}
			if out += u.flush(); out != text {
				t.Errorf("%q by %d: %q", text, step, out)
			}
		}
	}
}
