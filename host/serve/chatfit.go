package serve

import (
	"errors"
	"fmt"

	"verity/host/tokenizer"
)

// ChatFit is a conversation fitted to a number of tokens (FitChat).
type ChatFit struct {
	Messages []tokenizer.Message // kept: the head, then the latest turns, in order
	Tokens   []int32             // their tokens
	// Head is how many leading system messages were kept (all of them); DroppedTurns and
	// DroppedMessages what was taken out of the middle.
	Head                          int
	DroppedTurns, DroppedMessages int
	// TokensBefore is the whole conversation's token count (0 when it was too long to encode).
	TokensBefore int
}

// Truncated reports whether anything was dropped.
func (f ChatFit) Truncated() bool { return f.DroppedMessages > 0 }

// Truncation says in a reply that a conversation was truncated to fit the context.
type Truncation struct {
	DroppedTurns    int `json:"dropped_turns"`
	DroppedMessages int `json:"dropped_messages"`
	// PromptTokensBefore is the whole conversation's prompt tokens (0: too long to count).
	PromptTokensBefore int `json:"prompt_tokens_before"`
}

// Truncation is f's, or nil when nothing was dropped.
func (f ChatFit) Truncation() *Truncation {
	if !f.Truncated() {
		return nil
	}
	return &Truncation{DroppedTurns: f.DroppedTurns, DroppedMessages: f.DroppedMessages, PromptTokensBefore: f.TokensBefore}
}

// FitChat fits a conversation into limit tokens (the context less the room kept for the
// answer): whole, when it fits; else its head — the leading system messages — and the latest
// turns that fit beside it, the turns in between dropped whole. A turn is a user message and
// the messages after it up to the next user message (messages between the head and the first
// user message count as one turn, the first to go); the last turn is always kept. encode
// gives a conversation's prompt tokens (an error wrapping ErrContextLength counts as too
// long). It fails with ErrContextLength, with the numbers, when not even the head and the last
// turn fit.
func FitChat(msgs []tokenizer.Message, encode func([]tokenizer.Message) ([]int32, error), limit int) (ChatFit, error) {
	head := 0
	for head < len(msgs) && msgs[head].Role == "system" {
		head++
	}
	// the turns: where each begins in msgs
	var starts []int
	for i := head; i < len(msgs); i++ {
		if i == head || msgs[i].Role == "user" {
			starts = append(starts, i)
		}
	}
	try := func(drop int) ([]tokenizer.Message, []int32, bool, error) {
		kept := msgs
		if drop > 0 {
			kept = append(append([]tokenizer.Message{}, msgs[:head]...), msgs[starts[drop]:]...)
		}
		toks, err := encode(kept)
		if errors.Is(err, ErrContextLength) {
			return kept, nil, false, nil
		}
		if err != nil {
			return nil, nil, false, err
		}
		return kept, toks, len(toks) <= limit, nil
	}
	kept, toks, ok, err := try(0)
	if err != nil {
		return ChatFit{}, err
	}
	fit := ChatFit{Head: head, TokensBefore: len(toks)}
	if ok {
		fit.Messages, fit.Tokens = kept, toks
		return fit, nil
	}
	if len(starts) < 2 {
		return ChatFit{}, fitError(len(toks), limit, head)
	}
	// the fewest turns dropped that fit: fewer tokens with each turn dropped
	lo, hi := 1, len(starts)-1 // hi: only the last turn kept
	kept, toks, ok, err = try(hi)
	if err != nil {
		return ChatFit{}, err
	}
	if !ok {
		return ChatFit{}, fitError(len(toks), limit, head)
	}
	best, bestKept, bestToks := hi, kept, toks
	for lo < best {
		mid := (lo + best - 1) / 2
		kept, toks, ok, err := try(mid)
		if err != nil {
			return ChatFit{}, err
		}
		if ok {
			best, bestKept, bestToks = mid, kept, toks
		} else {
			lo = mid + 1
		}
	}
	fit.Messages, fit.Tokens = bestKept, bestToks
	fit.DroppedTurns, fit.DroppedMessages = best, starts[best]-head
	return fit, nil
}

// fitError says that not even the head and the last turn fit.
func fitError(tokens, limit, head int) error {
	what := "the latest turn"
	if head > 0 {
		what = fmt.Sprintf("the %d system message(s) and the latest turn", head)
	}
	if tokens > 0 {
		return paramErr(ErrContextLength, "messages", "%s take %d tokens: more than the %d the context leaves beside the room kept for the answer", what, tokens, limit)
	}
	return paramErr(ErrContextLength, "messages", "%s take more than the %d tokens the context leaves beside the room kept for the answer", what, limit)
}
