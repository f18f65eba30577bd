package serve_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"verity/host/engine"
	"verity/host/serve"
	"verity/host/tokenizer"
)

// countEncode is a stand-in chat template: each message costs 4 tokens and one per byte of its
// content, the assistant's opening 3 (the tokens are the bytes, for checking what was kept).
func countEncode(msgs []tokenizer.Message) ([]int32, error) {
	var out []int32
	for _, m := range msgs {
		out = append(out, -1, int32(len(m.Role)), -2, -3)
		for _, c := range []byte(m.Content) {
			out = append(out, int32(c))
		}
	}
	return append(out, -4, -5, -6), nil
}

// conversation makes a system head of h messages and turns of a user message and up to two
// replies, their contents of random lengths.
func conversation(r *rand.Rand, h, turns, maxLen int) []tokenizer.Message {
	var msgs []tokenizer.Message
	text := func() string { return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(maxLen+1)) }
	for range h {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: text()})
	}
	for range turns {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: text()})
		for range r.IntN(3) {
			msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: text()})
		}
	}
	return msgs
}

// checkFit checks a fit of msgs to limit against the rule: the whole conversation when it fits;
// else exactly the head and the latest turns, the fewest turns dropped that fit, the last turn
// always kept; tokens those of the kept messages, within the limit.
func checkFit(t testing.TB, msgs []tokenizer.Message, limit int, fit serve.ChatFit, err error) {
	t.Helper()
	all, _ := countEncode(msgs)
	head := 0
	for head < len(msgs) && msgs[head].Role == "system" {
		head++
	}
	var starts []int
	for i := head; i < len(msgs); i++ {
		if i == head || msgs[i].Role == "user" {
			starts = append(starts, i)
		}
	}
	keep := func(drop int) []tokenizer.Message {
		if drop == 0 {
			return msgs
		}
		return append(slices.Clone(msgs[:head]), msgs[starts[drop]:]...)
	}
	fits := func(drop int) bool { toks, _ := countEncode(keep(drop)); return len(toks) <= limit }
	if err != nil {
		if !errors.Is(err, serve.ErrContextLength) {
			t.Fatalf("error %v, want ErrContextLength", err)
		}
		if fits(0) || len(starts) > 1 && fits(len(starts)-1) {
			t.Fatalf("refused a conversation that fits: %v", err)
		}
		return
	}
	want := 0
	for !fits(want) {
		want++
	}
	if fit.DroppedTurns != want || fit.DroppedMessages != len(msgs)-len(keep(want)) || fit.Head != head {
		t.Fatalf("dropped %d turns (%d messages), head %d; want %d turns (%d messages), head %d",
			fit.DroppedTurns, fit.DroppedMessages, fit.Head, want, len(msgs)-len(keep(want)), head)
	}
	if !slices.Equal(fit.Messages, keep(want)) {
		t.Fatalf("kept %v, want %v", fit.Messages, keep(want))
	}
	toks, _ := countEncode(fit.Messages)
	if !slices.Equal(fit.Tokens, toks) || len(fit.Tokens) > limit || fit.TokensBefore != len(all) {
		t.Fatalf("tokens %d (of %d before), want %d ≤ %d", len(fit.Tokens), fit.TokensBefore, len(toks), limit)
	}
	if fit.Truncated() != (want > 0) || (fit.Truncation() == nil) == (want > 0) {
		t.Fatalf("truncated %v with %d turns dropped", fit.Truncated(), want)
	}
}

func TestFitChat(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		msgs := conversation(r, r.IntN(3), 1+r.IntN(8), 30)
		all, _ := countEncode(msgs)
		limit := 1 + r.IntN(len(all)+10)
		fit, err := serve.FitChat(msgs, countEncode, limit)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkFit(t, msgs, limit, fit, err) })
	}
	// the encoder's own refusal of a text too long counts as not fitting
	msgs := conversation(r, 1, 6, 20)
	tooLong := func(ms []tokenizer.Message) ([]int32, error) {
		if len(ms) > 4 {
			return nil, fmt.Errorf("%w: long", serve.ErrContextLength)
		}
		return countEncode(ms)
	}
	fit, err := serve.FitChat(msgs, tooLong, 1<<20)
	if err != nil || len(fit.Messages) > 4 || fit.TokensBefore != 0 || !fit.Truncated() {
		t.Errorf("an encoder refusing long texts: %+v, %v", fit, err)
	}
	// any other encoder error is the fit's
	bad := errors.New("no template")
	if _, err := serve.FitChat(msgs, func([]tokenizer.Message) ([]int32, error) { return nil, bad }, 100); !errors.Is(err, bad) {
		t.Errorf("encoder error: %v", err)
	}
}

func FuzzFitChat(f *testing.F) {
	f.Add(uint64(1), uint8(1), uint8(5), uint16(40), uint16(80))
	f.Add(uint64(2), uint8(0), uint8(1), uint16(3), uint16(2))
	f.Add(uint64(3), uint8(3), uint8(60), uint16(200), uint16(900))
	f.Fuzz(func(t *testing.T, seed uint64, head, turns uint8, maxLen, limit uint16) {
		r := rand.New(rand.NewPCG(seed, 9))
		msgs := conversation(r, int(head%4), 1+int(turns%64), int(maxLen%256))
		fit, err := serve.FitChat(msgs, countEncode, int(limit))
		checkFit(t, msgs, int(limit), fit, err)
	})
}

// A chat longer than the context keeps its system message and latest turns, keeps room for
// the answer, and says so in the reply and its usage; the prompt is the kept messages' tokens.
func TestChatTruncated(t *testing.T) {
	const name = "tiny-qwen3-q8_0"
	const context = 96
	tk, _, _, srv := completionServer(t, name, engine.LoadOptions{MaxRows: 8, Context: context, Sessions: 2})
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"sky", "blue", "why", "light", "sun", "air"}
	say := func(n int) string {
		var b []string
		for range n {
			b = append(b, words[r.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}}
	for range 12 {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: say(6)}, tokenizer.Message{Role: "assistant", Content: say(5)})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: "and now?"})
	const maxTokens = 20
	for _, stream := range []bool{false, true} {
		body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": maxTokens, "temperature": 0, "stream": stream,
			"stream_options": map[string]bool{"include_usage": true}})
		if !stream {
			body, _ = json.Marshal(map[string]any{"messages": msgs, "max_tokens": maxTokens, "temperature": 0})
		}
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		var cc serve.ChatCompletion
		if stream {
			var last serve.ChatCompletion
			for _, line := range strings.Split(readAll(t, resp), "\n") {
				if js, ok := strings.CutPrefix(line, "data: "); ok && js != "[DONE]" {
					var chunk serve.ChatCompletion
					if err := json.Unmarshal([]byte(js), &chunk); err != nil {
						t.Fatal(err)
					}
					if chunk.Truncated == nil {
						t.Fatalf("a chunk without the truncation: %s", js)
					}
					last = chunk
				}
			}
			cc = last
		} else {
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
			}
			if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		tr, u := cc.Truncated, cc.Usage
		if tr == nil || u == nil || u.Truncated == nil || *u.Truncated != *tr || tr.DroppedTurns < 1 {
			t.Fatalf("stream %v: truncation %+v, usage %+v", stream, tr, u)
		}
		// what was kept: the system message, then the turns after the dropped ones
		kept := append([]tokenizer.Message{msgs[0]}, msgs[1+tr.DroppedMessages:]...)
		if tr.DroppedMessages != 2*tr.DroppedTurns {
			t.Errorf("dropped %d messages in %d turns", tr.DroppedMessages, tr.DroppedTurns)
		}
		text, _ := tk.Chat(kept, nil)
		prompt := tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: true})
		if u.PromptTokens != len(prompt) || u.PromptTokens+maxTokens > context {
			t.Errorf("prompt of %d tokens (the kept messages have %d), with %d for the answer in %d", u.PromptTokens, len(prompt), maxTokens, context)
		}
		// one more turn would not have left the answer its room
		more := append([]tokenizer.Message{msgs[0]}, msgs[1+tr.DroppedMessages-2:]...)
		text, _ = tk.Chat(more, nil)
		if n := len(tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: true})); n+maxTokens <= context {
			t.Errorf("a turn more (%d tokens) would have fitted", n)
		}
		// (0: a text too long for the service to encode at all)
		if full, _ := tk.Chat(msgs, nil); tr.PromptTokensBefore != 0 && tr.PromptTokensBefore != len(tk.Encode(full, tokenizer.Options{AddSpecial: true, ParseSpecial: true})) {
			t.Errorf("tokens before %d", tr.PromptTokensBefore)
		}
	}
	// the latest turn alone too long: context_length_exceeded, with the numbers
	long := []tokenizer.Message{{Role: "user", Content: say(200)}}
	body, _ := json.Marshal(map[string]any{"messages": long, "max_tokens": 5})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if s := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(s, "context_length_exceeded") || !strings.Contains(s, "latest turn") {
		t.Errorf("a turn too long: %d %s", resp.StatusCode, s)
	}
	// a conversation that fits is not marked
	body, _ = json.Marshal(map[string]any{"messages": msgs[len(msgs)-3:], "max_tokens": 5})
	resp, err = http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if s := readAll(t, resp); resp.StatusCode != 200 || strings.Contains(s, "truncated") {
		t.Errorf("a short chat: %d %s", resp.StatusCode, s)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
