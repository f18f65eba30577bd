// Package tokenizer turns text into token ids and back with the vocabulary a GGUF file carries
// (the tokenizer.ggml.* keys), producing the ids llama.cpp's llama_tokenize produces for the same
// file and text.
//
// Supported: byte-level BPE (tokenizer.ggml.model "gpt2") with the pre-tokenizers of Llama 3
// (llama-bpe and its aliases), Qwen2/Qwen3 (qwen2), Qwen3.5 (qwen35), GPT-2 (gpt-2) and
// llama.cpp's default; and SentencePiece BPE ("llama": Llama 2, Mistral), see spm.go. Each
// pre-tokenizer is one entry in preTokenizers (bpe.go); another tokenizer model is one file
// with its encoder.
//
// Byte-level BPE encoding, as llama.cpp does it:
//  1. Special tokens are cut out of the text first: USER_DEFINED tokens always, CONTROL and
//     UNKNOWN tokens only with ParseSpecial. Longer special tokens are cut first; each cuts
//     every remaining piece of text at its occurrences, left to right.
//  2. Each remaining piece is decoded as UTF-8 the way llama.cpp decodes it (an invalid byte
//     becomes U+FFFD; overlong forms and surrogates are accepted), split into words by the
//     pre-tokenizer's regular expressions (each one splits the pieces the previous one left,
//     keeping the text between matches), and each word is spelled in GPT-2's byte alphabet.
//  3. A word that is itself a token is that token where the pre-tokenizer says so (Llama 3);
//     otherwise its characters are merged pair by pair, always the pair of lowest merge rank,
//     leftmost first, until no adjacent pair has a rank. A final piece that is not a token
//     falls back to the tokens of its single bytes (those that exist).
//  4. With AddSpecial, BOS goes first and EOS last where the file asks for them
//     (tokenizer.ggml.add_bos_token / add_eos_token, else the pre-tokenizer's default).
package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"verity/host/gguf"
)

// Token types, as llama.cpp's llama_token_type numbers them in tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Options select what Encode adds and recognises.
type Options struct {
	AddSpecial   bool // BOS first / EOS last where the vocabulary asks for them
	ParseSpecial bool // recognise CONTROL tokens (e.g. "<|im_start|>") written in the text
}

// Tokenizer is a loaded vocabulary. It is safe for concurrent use.
type Tokenizer struct {
	model, preName string
	tokens         []string
	types          []int32
	index          map[string]int32
	enc            encoder
	spm            *spm           // the SentencePiece encoder, nil for byte-level BPE
	specials       []int32        // CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first
	rstrip         map[int32]bool // special tokens that swallow the whitespace after them
	eog            map[int32]bool
	bos, eos       int32 // -1 when the vocabulary has none
	addBOS, addEOS bool
	// the chat template: tokenizer.chat_template's text, and how Chat writes a conversation
	templateText string
	chat         chatFormat
	maxPiece     int // the most bytes of text one token covers
}

// MaxPieceBytes is the most bytes of text one token stands for: a text of n bytes encodes to at
// least n / MaxPieceBytes tokens, which bounds a prompt's text before it is encoded.
func (t *Tokenizer) MaxPieceBytes() int { return max(1, t.maxPiece) }

// MaxTokens bounds a vocabulary's size (the id must fit an int32 with room to spare).
const MaxTokens = 1 << 24

// Load reads the tokenizer of a GGUF file.
func Load(f *gguf.File) (*Tokenizer, error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if len(tokens) == 0 || len(tokens) > MaxTokens {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.tokens holds %d tokens (want 1 … %d)", len(tokens), MaxTokens)
	}
	t := &Tokenizer{model: model, tokens: tokens, bos: -1, eos: -1}
	if f.Has("tokenizer.ggml.token_type") {
		if t.types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if len(t.types) != len(tokens) {
			return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(t.types), len(tokens))
		}
		t.types = slices.Clone(t.types) // Load may change some; the file's values stay as read
	} else {
		t.types = make([]int32, len(tokens))
		for i := range t.types {
			t.types[i] = TypeNormal
		}
	}
	t.index = make(map[string]int32, len(tokens))
	for i, s := range tokens {
		// Where a text appears twice, the later id wins, as in llama.cpp's token_to_id map.
		t.index[s] = int32(i)
	}
	switch model {
	case "gpt2":
		if t.preName, err = f.StringOr("tokenizer.ggml.pre", "default"); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		merges, err := f.Strings("tokenizer.ggml.merges")
		if err != nil {
			return nil, fmt.Errorf("tokenizer: a gpt2 tokenizer needs its merges: %w", err)
		}
		b, err := newBPE(t.preName, merges)
		if err != nil {
			return nil, err
		}
		t.enc, t.addBOS = b, b.pre.addBOS
	case "llama":
		t.preName = "sentencepiece"
		if t.spm, err = newSPM(f, t); err != nil {
			return nil, err
		}
		t.enc, t.addBOS = t.spm, true
	default:
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model %q is not supported (supported: gpt2, llama)", model)
	}
	for _, k := range []struct {
		key string
		id  *int32
	}{{"tokenizer.ggml.bos_token_id", &t.bos}, {"tokenizer.ggml.eos_token_id", &t.eos}} {
		if !f.Has(k.key) {
			continue
		}
		v, err := f.Int(k.key)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if v < 0 || v >= int64(len(tokens)) {
			return nil, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", k.key, v, len(tokens))
		}
		*k.id = int32(v)
	}
	if t.addBOS, err = f.BoolOr("tokenizer.ggml.add_bos_token", t.addBOS); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if t.addEOS, err = f.BoolOr("tokenizer.ggml.add_eos_token", false); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: the vocabulary asks for a BOS token but names none")
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tokenizer: the vocabulary asks for an EOS token but names none")
	}
	// End of generation: EOS, the end-of-turn and end-of-message tokens the file names, and the
	// tokens spelled like one of them, which llama.cpp also makes CONTROL tokens.
	t.eog = map[int32]bool{}
	if t.eos >= 0 {
		t.eog[t.eos] = true
	}
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if f.Has(key) {
			v, err := f.Int(key)
			if err != nil {
				return nil, fmt.Errorf("tokenizer: %w", err)
			}
			if v >= 0 && v < int64(len(tokens)) {
				t.eog[int32(v)] = true
			}
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.index[text]; ok {
			t.eog[id] = true
			t.types[id] = TypeControl
		}
	}
	for i, ty := range t.types {
		if (ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown) && tokens[i] != "" {
			t.specials = append(t.specials, int32(i))
		}
	}
	sort.SliceStable(t.specials, func(a, b int) bool {
		return len(tokens[t.specials[a]]) > len(tokens[t.specials[b]])
	})
	// As llama.cpp does for a model whose general.name names Phi-3: its special tokens but
	// <unk>, <s> and <|endoftext|> (and also </s>) swallow the whitespace that follows them.
	name, err := f.StringOr("general.name", "")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if name = strings.ToLower(name); strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		t.rstrip = map[int32]bool{}
		for _, id := range t.specials {
			t.rstrip[id] = true
		}
		if id, ok := t.index["</s>"]; ok {
			t.rstrip[id] = true
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.index[s]; ok {
				delete(t.rstrip, id)
			}
		}
	}
	for i := range tokens {
		if p, _ := t.Piece(int32(i), true); len(p) > t.maxPiece {
			t.maxPiece = len(p)
		}
		if len(tokens[i]) > t.maxPiece { // a special token's text, SentencePiece's spelling
			t.maxPiece = len(tokens[i])
		}
	}
	if t.templateText, err = f.StringOr("tokenizer.chat_template", ""); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t.chat = t.chatFormat(t.templateText)
	return t, nil
}

// eogTexts are the texts of tokens that end generation (llama.cpp's list, the common part).
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>",
	"<|eom_id|>", "<|end_of_text|>", "<eos>"}

// IsEOG reports whether token id ends generation (EOS, end of turn, end of message).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// AddsBOS and AddsEOS report whether Encode with AddSpecial puts BOS first and EOS last.
func (t *Tokenizer) AddsBOS() bool { return t.addBOS }

// AddsEOS: see AddsBOS.
func (t *Tokenizer) AddsEOS() bool { return t.addEOS }

// NVocab is the number of tokens.
func (t *Tokenizer) NVocab() int { return len(t.tokens) }

// BOS and EOS are the begin- and end-of-sequence tokens, -1 where the vocabulary names none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS: see BOS.
func (t *Tokenizer) EOS() int32 { return t.eos }

// Model is the tokenizer model: tokenizer.ggml.model, gpt2 (byte-level BPE) or llama
// (SentencePiece).
func (t *Tokenizer) Model() string { return t.model }

// PreTokenizer names the pre-tokenizer: tokenizer.ggml.pre for byte-level BPE ("default"
// when the file names none), "sentencepiece" for SentencePiece.
func (t *Tokenizer) PreTokenizer() string { return t.preName }

// String names the tokenizer: its model and pre-tokenizer.
func (t *Tokenizer) String() string {
	return fmt.Sprintf("%s (%s), %d tokens", t.model, t.preName, len(t.tokens))
}

// Token returns token id's text as the vocabulary spells it, and its type.
func (t *Tokenizer) Token(id int32) (string, int32, error) {
	if id < 0 || int(id) >= len(t.tokens) {
		return "", 0, fmt.Errorf("tokenizer: token %d is outside the vocabulary of %d tokens", id, len(t.tokens))
	}
	return t.tokens[id], t.types[id], nil
}

// encoder is a tokenizer model's encoding of raw text (no special tokens in it).
type encoder interface {
	// encode appends the tokens of one piece of raw text; afterSpecial says whether the piece
	// starts the text or follows a special token.
	encode(t *Tokenizer, text string, afterSpecial bool, out []int32) []int32
	// piece is the bytes of a normal or byte token.
	piece(t *Tokenizer, id int32) []byte
}

// fragment is a piece of the text being encoded: raw text, or one special token.
type fragment struct {
	text  string
	token int32 // −1 for raw text
}

// Encode returns the token ids of text.
func (t *Tokenizer) Encode(text string, o Options) []int32 {
	return t.encodeFragments(t.partition(text, o.ParseSpecial), o.AddSpecial)
}

// encodeFragments encodes partitioned text (steps 2–4 of the package comment).
func (t *Tokenizer) encodeFragments(frags []fragment, addSpecial bool) []int32 {
	var out []int32
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	afterSpecial := true // the text's start counts as following a special token
	for _, fr := range frags {
		if fr.token >= 0 {
			out = append(out, fr.token)
			afterSpecial = true
			continue
		}
		out = t.enc.encode(t, fr.text, afterSpecial, out)
		afterSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// partition cuts the special tokens out of text (step 1 of the package comment).
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text: text, token: -1}}
	for _, id := range t.specials {
		ty := t.types[id]
		if !parseSpecial && (ty == TypeControl || ty == TypeUnknown) {
			continue
		}
		st := t.tokens[id]
		var next []fragment
		for _, fr := range frags {
			if fr.token >= 0 || !strings.Contains(fr.text, st) {
				next = append(next, fr)
				continue
			}
			rest := fr.text
			for {
				i := strings.Index(rest, st)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: rest[:i], token: -1})
				}
				next = append(next, fragment{text: st, token: id})
				rest = rest[i+len(st):]
				if t.rstrip[id] {
					rest = strings.TrimLeft(rest, " \t\n\v\f\r") // C's isspace
				}
			}
			if rest != "" {
				next = append(next, fragment{text: rest, token: -1})
			}
		}
		frags = next
	}
	return frags
}

// Piece returns the bytes token id stands for. CONTROL and UNKNOWN tokens give their text only
// with special (else nothing); USER_DEFINED tokens give their text; normal tokens are read
// back from GPT-2's byte alphabet (a character outside it is kept as it is), or for
// SentencePiece with "▁" read as a space; byte tokens give their byte.
func (t *Tokenizer) Piece(id int32, special bool) ([]byte, error) {
	s, ty, err := t.Token(id)
	if err != nil {
		return nil, err
	}
	switch ty {
	case TypeControl, TypeUnknown:
		if !special {
			return nil, nil
		}
		return []byte(s), nil
	case TypeUserDefined:
		return []byte(s), nil
	case TypeNormal, TypeByte:
		return t.enc.piece(t, id), nil
	}
	return nil, nil
}

// Decode concatenates the pieces of ids (see Piece). For SentencePiece, the space that Encode
// puts before the text and after each special token is taken off again, so that Decode undoes
// Encode.
func (t *Tokenizer) Decode(ids []int32, special bool) (string, error) {
	var b []byte
	afterSpecial := true
	for _, id := range ids {
		p, err := t.Piece(id, special)
		if err != nil {
			return "", err
		}
		switch t.types[id] {
		case TypeControl, TypeUserDefined, TypeUnknown:
			afterSpecial = true
		default:
			if afterSpecial && t.spm != nil && t.spm.addSpacePrefix && len(p) > 0 && p[0] == ' ' {
				p = p[1:]
			}
			afterSpecial = false
		}
		b = append(b, p...)
	}
	return string(b), nil
}
