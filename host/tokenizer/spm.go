package tokenizer

import (
	"container/heap"
	"fmt"
	"strings"

	"verity/host/gguf"
)

// SentencePiece BPE (tokenizer.ggml.model "llama": Llama 2, Mistral, …), as llama.cpp's SPM
// tokenizer encodes a piece of raw text:
//  1. A space goes in front of a piece that starts the text or follows a special token (unless
//     tokenizer.ggml.add_space_prefix is false); every space becomes "▁" (U+2581).
//  2. The bytes are split into characters by their lead bytes alone (no decoding), and adjacent
//     symbols whose concatenation is a token are merged, the highest-scoring
//     (tokenizer.ggml.scores) first, leftmost among equal scores.
//  3. Each final symbol is its token; one that is not a token is spelled with the byte tokens
//     "<0xXX>" (or, lacking one, the byte's own one-character token, or else the unknown token).
//
// BOS is added by default.

const spaceMark = "\u2581"

type spm struct {
	scores         []float32
	addSpacePrefix bool
	byteToken      [256]int32 // −1: none
	unk            int32      // −1: none
}

func newSPM(f *gguf.File, t *Tokenizer) (*spm, error) {
	s := &spm{unk: -1}
	var err error
	if s.scores, err = f.Float32s("tokenizer.ggml.scores"); err != nil {
		return nil, fmt.Errorf("tokenizer: a SentencePiece tokenizer needs its scores: %w", err)
	}
	if len(s.scores) != len(t.tokens) {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(s.scores), len(t.tokens))
	}
	if s.addSpacePrefix, err = f.BoolOr("tokenizer.ggml.add_space_prefix", true); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if f.Has("tokenizer.ggml.unknown_token_id") {
		v, err := f.Int("tokenizer.ggml.unknown_token_id")
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if v < 0 || v >= int64(len(t.tokens)) {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.unknown_token_id = %d is outside the vocabulary of %d tokens", v, len(t.tokens))
		}
		s.unk = int32(v)
	}
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		s.byteToken[b] = -1
		if id, ok := t.index["<0x"+string(hex[b>>4])+string(hex[b&15])+">"]; ok {
			s.byteToken[b] = id
		} else if id, ok := t.index[string([]byte{byte(b)})]; ok {
			s.byteToken[b] = id
		}
	}
	// llama.cpp's defaults where the file names no BOS/EOS.
	if t.bos < 0 && len(t.tokens) > 2 {
		t.bos, t.eos = 1, 2
	}
	return s, nil
}

func (s *spm) piece(t *Tokenizer, id int32) []byte {
	text := t.tokens[id]
	if t.types[id] == TypeByte {
		// "<0xXX>"
		var b byte
		if _, err := fmt.Sscanf(text, "<0x%02X>", &b); err == nil && len(text) == 6 {
			return []byte{b}
		}
	}
	return []byte(strings.ReplaceAll(text, spaceMark, " "))
}

type spmSymbol struct {
	start, n   int // bytes of the text; n = 0 once merged into its left neighbour
	prev, next int
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
}

// spmQueue is a heap with the highest score first, then the leftmost.
type spmQueue []spmBigram

func (q spmQueue) Len() int { return len(q) }
func (q spmQueue) Less(i, j int) bool {
	return q[i].score > q[j].score || (q[i].score == q[j].score && q[i].left < q[j].left)
}
func (q spmQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *spmQueue) Push(x any)   { *q = append(*q, x.(spmBigram)) }
func (q *spmQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (s *spm) encode(t *Tokenizer, raw string, afterSpecial bool, out []int32) []int32 {
	text := raw
	if s.addSpacePrefix && afterSpecial {
		text = " " + text
	}
	text = strings.ReplaceAll(text, " ", spaceMark)
	var syms []spmSymbol
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		syms = append(syms, spmSymbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	var queue spmQueue
	revMerge := map[string][2]int{}
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		piece := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := t.index[piece]
		if !ok {
			return
		}
		heap.Push(&queue, spmBigram{left: l, right: r, score: s.scores[id], size: len(piece)})
		revMerge[piece] = [2]int{l, r}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	for queue.Len() > 0 {
		bg := heap.Pop(&queue).(spmBigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		add(l.prev, bg.left)
		add(bg.left, l.next)
	}
	// resegment: a symbol that is not a token goes back to the pair that made it, else to
	// bytes. (Every merge makes a token, so only unmerged characters reach the byte spelling;
	// the depth bound only guards the recursion.)
	var resegment func(i, depth int)
	resegment = func(i, depth int) {
		piece := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.index[piece]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[piece]; ok && depth < 64 {
			resegment(p[0], depth+1)
			resegment(p[1], depth+1)
			return
		}
		for j := 0; j < len(piece); j++ {
			if id := s.byteToken[piece[j]]; id >= 0 {
				out = append(out, id)
			} else if s.unk >= 0 {
				out = append(out, s.unk)
			}
		}
	}
	for i := 0; i != -1; i = syms[i].next {
		resegment(i, 0)
	}
	return out
}
