package tokenizer

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrChatContent is wrapped by EncodeChat's error when the chat template changes a message's
// content in a way that cannot be told apart from the template's own text.
var ErrChatContent = errors.New("tokenizer: the chat template changes the messages' contents")

// EncodeChat returns the tokens of msgs in the model's chat template, with the assistant's
// turn opened (Chat's text), BOS first where the vocabulary adds it. Special tokens are
// recognised only in the template's own text: each message's content is encoded as plain
// text, so a content that spells "<|im_end|>" or "<|start_header_id|>" cannot close its turn
// or open another (it gets the tokens of those characters). Where no content spells a special
// token, the tokens are those of Encode(Chat(msgs, vars), AddSpecial and ParseSpecial).
//
// The contents are found in the text by rendering the template a second time with a marker in
// place of each (non-empty) content: the text between the markers is the template's. A
// template may trim a content's white space (as Llama 3's does); one that changes a content
// otherwise, or chooses what to write by what a content says, is refused (ErrChatContent).
func (t *Tokenizer) EncodeChat(msgs []Message, vars map[string]any) ([]int32, error) {
	text, err := t.Chat(msgs, vars)
	if err != nil {
		return nil, err
	}
	parts, err := t.chatParts(msgs, vars, text)
	if err != nil {
		return nil, err
	}
	var frags []fragment
	for _, p := range parts {
		frags = append(frags, t.partition(p.text, !p.content)...)
	}
	return t.encodeFragments(t.joinText(frags), true), nil
}

// chatPart is a piece of a chat's text: the template's (special tokens recognised) or a
// message's content (plain text).
type chatPart struct {
	text    string
	content bool
}

// chatParts cuts text, Chat's rendering of msgs, into the template's text and the messages'
// contents (see EncodeChat).
func (t *Tokenizer) chatParts(msgs []Message, vars map[string]any, text string) ([]chatPart, error) {
	// A marker no content, role or variable the text shows can contain: NUL, a nonce that
	// does not occur in the text, the message's index, NUL.
	nonce := "m"
	for strings.Contains(text, "\x00"+nonce) {
		nonce += "m"
	}
	marked := make([]Message, len(msgs))
	for i, m := range msgs {
		marked[i] = m
		if m.Content != "" { // an empty content adds nothing, and templates test for it
			marked[i].Content = "\x00" + nonce + strconv.Itoa(i) + "\x00"
		}
	}
	skeleton, err := t.Chat(marked, vars)
	if err != nil {
		return nil, fmt.Errorf("%w: it fails with the contents left out (%v)", ErrChatContent, err)
	}
	// The skeleton alternates the template's text and markers: [text, index, text, index, …, text].
	re := regexp.MustCompile("\x00" + regexp.QuoteMeta(nonce) + "([0-9]+)\x00")
	var pieces []string
	var index []int
	at := 0
	for _, m := range re.FindAllStringSubmatchIndex(skeleton, -1) {
		i, err := strconv.Atoi(skeleton[m[2]:m[3]])
		if err != nil || i >= len(msgs) {
			return nil, fmt.Errorf("%w: a marker for message %s", ErrChatContent, skeleton[m[2]:m[3]])
		}
		pieces = append(pieces, skeleton[at:m[0]])
		index = append(index, i)
		at = m[1]
	}
	pieces = append(pieces, skeleton[at:])
	// Match the skeleton against the text: each template piece literally, each content as
	// it is or with its white space trimmed (the first that the next template piece follows).
	var parts []chatPart
	pos := 0
	add := func(s string, content bool) {
		if s != "" {
			parts = append(parts, chatPart{text: s, content: content})
		}
		pos += len(s)
	}
	for k, piece := range pieces {
		if !strings.HasPrefix(text[pos:], piece) {
			return nil, fmt.Errorf("%w: what it writes besides the contents depends on them", ErrChatContent)
		}
		add(piece, false)
		if k == len(index) {
			break
		}
		c := msgs[index[k]].Content
		next, last := pieces[k+1], k+1 == len(index)
		found := false
		for _, cand := range []string{c, strings.TrimSpace(c), strings.TrimLeft(c, chatSpace), strings.TrimRight(c, chatSpace)} {
			rest, ok := strings.CutPrefix(text[pos:], cand)
			if ok && strings.HasPrefix(rest, next) && (!last || len(rest) == len(next)) {
				add(cand, true)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: message %d's content is not in the text as given (or trimmed)", ErrChatContent, index[k])
		}
	}
	if pos != len(text) {
		return nil, fmt.Errorf("%w: the text runs past the template's", ErrChatContent)
	}
	return parts, nil
}

// chatSpace is the white space templates trim (Python's str.strip and Jinja's trim).
const chatSpace = " \t\n\r\v\f"

// joinText merges adjacent raw-text fragments (of different chat parts) into one, so that
// a content is pre-tokenized with the template's text around it as Encode would, and applies
// the right-stripping of special tokens that swallow the white space after them (Phi-3's)
// across parts.
func (t *Tokenizer) joinText(frags []fragment) []fragment {
	var out []fragment
	strip := false
	for _, fr := range frags {
		if fr.token >= 0 {
			out = append(out, fr)
			strip = t.rstrip[fr.token]
			continue
		}
		text := fr.text
		if strip {
			text = strings.TrimLeft(text, " \t\n\v\f\r") // C's isspace, as partition
		}
		if text == "" {
			continue
		}
		strip = false
		if n := len(out); n > 0 && out[n-1].token < 0 {
			out[n-1].text += text
		} else {
			out = append(out, fragment{text: text, token: -1})
		}
	}
	return out
}

// ChatTokens is EncodeChat where the template allows it. For a template that EncodeChat
// refuses (one that writes differently depending on what a content says, as some templates do
// with an assistant message's reasoning), it returns the tokens of Chat's text with special
// tokens recognised everywhere — how llama.cpp encodes every chat, where a content can spell
// control tokens — and guarded false.
func (t *Tokenizer) ChatTokens(msgs []Message, vars map[string]any) (ids []int32, guarded bool, err error) {
	ids, err = t.EncodeChat(msgs, vars)
	if !errors.Is(err, ErrChatContent) {
		return ids, err == nil, err
	}
	text, err := t.Chat(msgs, vars)
	if err != nil {
		return nil, false, err
	}
	return t.Encode(text, Options{AddSpecial: true, ParseSpecial: true}), false, nil
}
