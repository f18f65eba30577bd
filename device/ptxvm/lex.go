package ptxvm

import (
	"fmt"
	"strings"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // opcodes, directives (.reg), registers (%r1), labels, symbols
	tNumber         // 12, 0x1f, 0f3F800000, 0d3FF0000000000000, 1.5
	tString         // "…" (only in .file and .pragma)
	tPunct          // one of {}[]();,:@!+-<>=|
)

type token struct {
	kind tokKind
	text string
	line int
}

func (t token) String() string {
	if t.kind == tEOF {
		return "end of file"
	}
	return fmt.Sprintf("%q", t.text)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c == '%' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9'
}

// lex splits PTX source into tokens, dropping // and /* */ comments.
func lex(src string) ([]token, error) {
	var out []token
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' && src[j] != '\n' {
				j++
			}
			if j >= len(src) || src[j] != '"' {
				return nil, fmt.Errorf("line %d: unterminated string", line)
			}
			out = append(out, token{tString, src[i+1 : j], line})
			i = j + 1
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (isIdentChar(src[j]) || (src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E') && !strings.HasPrefix(src[i:], "0x") && !strings.HasPrefix(src[i:], "0f") && !strings.HasPrefix(src[i:], "0d")) {
				j++
			}
			out = append(out, token{tNumber, src[i:j], line})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(src) {
				if isIdentChar(src[j]) {
					j++
				} else if src[j] == ':' && j+2 < len(src) && src[j+1] == ':' && isIdentChar(src[j+2]) {
					j += 2 // qualifiers such as .shared::cta and .L2::128B
				} else {
					break
				}
			}
			out = append(out, token{tIdent, src[i:j], line})
			i = j
		case strings.IndexByte("{}[]();,:@!+-<>=|", c) >= 0:
			out = append(out, token{tPunct, src[i : i+1], line})
			i++
		default:
			return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
		}
	}
	out = append(out, token{tEOF, "", line})
	return out, nil
}
