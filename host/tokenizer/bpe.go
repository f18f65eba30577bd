package tokenizer

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// preTokenizer is how a byte-level BPE vocabulary splits text into words before merging.
type preTokenizer struct {
	regexes      []string // applied in turn; each splits the pieces the previous one left
	ignoreMerges bool     // a word that is itself a token is that token
	addBOS       bool     // BOS is added unless tokenizer.ggml.add_bos_token says otherwise
}

// The expressions are llama.cpp's (the case-insensitive contractions of the originals spelled
// out as character classes).
const (
	regexLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen35 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
)

// More of llama.cpp's expressions, for the pre-tokenizers below (non-ASCII characters
// escaped; "[\r\n]" holds the two characters themselves, as llama.cpp's does).
const (
	regexTekken    = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexGPT4o     = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexSeedCoder = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`
	// DeepSeek's: the CJK and Hangul ranges, and its own list of letters.
	regexCJK           = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
	regexDeepSeekAlpha = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
	regexDeepSeekPunct = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
	// Poro's, BLOOM's and Viking's: runs up to a space or one of these marks.
	regexPoro = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
)

var (
	preLlama3 = preTokenizer{regexes: []string{regexLlama3}, ignoreMerges: true, addBOS: true}
	preSmaug  = preTokenizer{regexes: []string{regexLlama3}}
	preQwen2  = preTokenizer{regexes: []string{regexQwen2}}
	preGPT2   = preTokenizer{regexes: []string{regexGPT2}}
	preSmolLM = preTokenizer{regexes: []string{`\p{N}`, regexGPT2}}
	prePoro   = preTokenizer{regexes: []string{regexPoro}}
	preGPT4o  = preTokenizer{regexes: []string{regexGPT4o}}
)

// preTokenizers maps tokenizer.ggml.pre to its pre-tokenizer, under the names llama.cpp
// accepts for it.
var preTokenizers = map[string]preTokenizer{
	"llama3": preLlama3, "llama-v3": preLlama3, "llama-bpe": preLlama3, "falcon3": preLlama3,
	"falcon-h1": preLlama3, "pixtral": preLlama3, "midm-2.0": preLlama3, "lfm2": preLlama3,
	"jina-v5-nano": preLlama3,
	"qwen2":        preQwen2, "deepseek-r1-qwen": preQwen2, "kormo": preQwen2, "f2llmv2": preQwen2,
	"megrez": preQwen2, "stablelm2": preQwen2,
	"qwen35": {regexes: []string{regexQwen35}},
	"gpt-2":  preGPT2, "phi-2": preGPT2, "roberta-bpe": preGPT2, "jina-v1-en": preGPT2,
	"mpt": preGPT2, "olmo": preGPT2, "jais": preGPT2, "trillion": preGPT2, "granite-docling": preGPT2,
	"exaone4": preGPT2, "gigachat": preGPT2, "a.x-4.0": preGPT2, "mellum": preGPT2, "modern-bert": preGPT2,
	"jina-es": preGPT2, "jina-de": preGPT2, "jina-v2-es": preGPT2, "jina-v2-de": preGPT2,
	"smollm": preSmolLM, "starcoder": preSmolLM, "refact": preSmolLM, "command-r": preSmolLM,
	"codeshell": preSmolLM, "exaone": preSmolLM, "minerva-7b": preSmolLM, "mellum2": preSmolLM,
	"smaug-bpe": preSmaug, "dbrx": preSmaug,
	"tekken": {regexes: []string{regexTekken}, ignoreMerges: true, addBOS: true},
	"gpt-4o": preGPT4o, "llama4": preGPT4o, "kanana2": preGPT4o, "talkie": preGPT4o, "minimax-m2": preGPT4o,
	"seed-coder": {regexes: []string{regexSeedCoder}},
	"falcon": {regexes: []string{
		"[\\p{P}\\$\\+<=>\\^~\\|`]+",
		regexGPT2,
		`[0-9][0-9][0-9]`,
	}},
	"deepseek-llm":   {regexes: []string{"[\r\n]", regexDeepSeekAlpha, regexDeepSeekPunct, `\s+$`, regexCJK, `\p{N}+`}},
	"deepseek-coder": {regexes: []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, regexCJK, `\p{N}`}},
	"poro-chat":      prePoro, "bloom": prePoro, "gpt3-finnish": prePoro,
	"viking": {regexes: []string{regexPoro, `\p{N}`}},
	"default": {regexes: []string{
		`[\p{P}\$\+<=>\^~\|]+`,
		`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`,
		`\p{N}+`,
		`[0-9][0-9][0-9]`,
	}},
}

// matchTimeout bounds one regular-expression search; none of the expressions backtracks
// badly, so reaching it means a bug, reported rather than hung on.
const matchTimeout = 10 * time.Second

type pair struct{ left, right string }

// bpe is a byte-level BPE vocabulary's merge table and pre-tokenizer.
type bpe struct {
	pre     preTokenizer
	regexes []*regexp2.Regexp
	ranks   map[pair]int
}

func newBPE(preName string, merges []string) (*bpe, error) {
	pre, ok := preTokenizers[preName]
	if !ok {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer %q is not supported (supported: %s)", preName,
			strings.Join(slices.Sorted(maps.Keys(preTokenizers)), ", "))
	}
	b := &bpe{pre: pre, ranks: make(map[pair]int, len(merges))}
	for _, expr := range pre.regexes {
		re, err := regexp2.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer %q: %w", preName, err)
		}
		re.MatchTimeout = matchTimeout
		b.regexes = append(b.regexes, re)
	}
	for i, m := range merges {
		// As llama.cpp reads a merge: split at the first space after the first byte; a merge
		// without one is the pair ("", ""), which never matches.
		var p pair
		if len(m) > 1 {
			if j := strings.IndexByte(m[1:], ' '); j >= 0 {
				p = pair{m[:j+1], m[j+2:]}
			}
		}
		if _, dup := b.ranks[p]; !dup {
			b.ranks[p] = i
		}
	}
	return b, nil
}

func (b *bpe) piece(t *Tokenizer, id int32) []byte { return decodeBytes(t.tokens[id]) }

// encode appends the tokens of a piece of raw text (steps 2 and 3 of the package comment).
func (b *bpe) encode(t *Tokenizer, text string, _ bool, out []int32) []int32 {
	words := b.split(decodeUTF8(text))
	var m merger
	for _, w := range words {
		word := spellBytes(encodeUTF8(w))
		if b.pre.ignoreMerges {
			if id, ok := t.index[word]; ok {
				out = append(out, id)
				continue
			}
		}
		for _, piece := range m.merge(b, word) {
			if id, ok := t.index[piece]; ok {
				out = append(out, id)
				continue
			}
			// Not a token: the tokens of its single bytes, where they exist. (The bytes are
			// those of the GPT-2 spelling, so only printable ASCII finds one; this is what
			// llama.cpp does, and a complete vocabulary never gets here.)
			for i := 0; i < len(piece); i++ {
				if id, ok := t.index[piece[i:i+1]]; ok {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

// split cuts code points into words with the pre-tokenizer's expressions.
func (b *bpe) split(cpts []rune) [][]rune {
	if len(cpts) == 0 {
		return nil
	}
	pieces := [][]rune{cpts}
	for _, re := range b.regexes {
		var next [][]rune
		for _, p := range pieces {
			at := 0
			err := re.FindRunesMatches(p, 0, func(m regexp2.MatchView) bool {
				lo, n, _ := m.GroupRange(0)
				hi := lo + n
				if lo > at {
					next = append(next, p[at:lo])
				}
				if hi > lo {
					next = append(next, p[lo:hi])
				}
				at = hi
				return true
			})
			if err != nil {
				// Only a timeout can fail a search; keep the rest of the piece whole.
				at = min(at, len(p))
			}
			if at < len(p) {
				next = append(next, p[at:])
			}
		}
		pieces = next
	}
	return pieces
}

// merger holds the work space of BPE merging, reused across words.
type merger struct {
	syms  []symbol
	queue bigramQueue
}

type symbol struct {
	start, n   int // bytes of the word; n = 0 once merged into its left neighbour
	prev, next int // neighbours in the chain, −1 at the ends
}

type bigram struct {
	left, right int
	rank        int
	text        string
}

// merge splits a word (spelled in GPT-2's alphabet) into its characters and merges adjacent
// pairs, lowest rank first and leftmost among equal ranks, until no pair has a rank. A queued
// pair whose symbols have changed since is skipped, as llama.cpp skips it.
func (m *merger) merge(b *bpe, word string) []string {
	m.syms = m.syms[:0]
	m.queue = m.queue[:0]
	for off := 0; off < len(word); {
		n := min(utf8Len(word[off]), len(word)-off)
		m.syms = append(m.syms, symbol{start: off, n: n, prev: len(m.syms) - 1, next: len(m.syms) + 1})
		off += n
	}
	m.syms[len(m.syms)-1].next = -1
	text := func(i int) string { return word[m.syms[i].start : m.syms[i].start+m.syms[i].n] }
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		lt, rt := text(l), text(r)
		if rank, ok := b.ranks[pair{lt, rt}]; ok {
			heap.Push(&m.queue, bigram{left: l, right: r, rank: rank, text: word[m.syms[l].start : m.syms[r].start+len(rt)]})
		}
	}
	for i := 1; i < len(m.syms); i++ {
		add(i-1, i)
	}
	for m.queue.Len() > 0 {
		bg := heap.Pop(&m.queue).(bigram)
		l, r := &m.syms[bg.left], &m.syms[bg.right]
		if l.n == 0 || r.n == 0 || l.start+l.n != r.start || text(bg.left)+text(bg.right) != bg.text {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			m.syms[r.next].prev = bg.left
		}
		add(l.prev, bg.left)
		add(bg.left, l.next)
	}
	var pieces []string
	for i := range m.syms {
		if m.syms[i].n > 0 {
			pieces = append(pieces, text(i))
		}
	}
	return pieces
}

// bigramQueue is a min-heap by (rank, left).
type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	return q[i].rank < q[j].rank || (q[i].rank == q[j].rank && q[i].left < q[j].left)
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
