package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"verity/fixtures"
	"verity/host/serve"
	"verity/host/tokenizer"
)

// openFixture opens a catalogue fixture through the library's core.
func openFixture(t *testing.T, name string, o openOptions) *model {
	t.Helper()
	path, err := fixtures.Path(name)
	if err != nil {
		t.Fatal(err)
	}
	id, err := openModel(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeModel(id) })
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.models[id]
}

// generate runs generateChat in a session and returns the text and the finish reason.
func generate(t *testing.T, sid uint64, msgs []tokenizer.Message, o genOptions) (string, int) {
	t.Helper()
	var b strings.Builder
	finish, err := generateChat(sid, msgs, o, func(s string) bool { b.WriteString(s); return false })
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), finish
}

// A chat generated in a session is the text the verify service's completion (what verity
// generate runs) writes for the same prompt and sampler — greedy and sampled, in a fresh
// session and in one that keeps an earlier turn's tokens.
func TestGenerateMatchesService(t *testing.T) {
	m := openFixture(t, "tiny-qwen3-f32", openOptions{threads: 2, context: 256, sessions: 2})
	sv := serve.New(m.m.Engine, serve.Options{Tokenizer: m.tk})
	defer sv.Shutdown()
	want := func(msgs []tokenizer.Message, o genOptions) (string, string) {
		prompt, err := m.tk.EncodeChat(msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		ts := serve.NewTextStream(m.tk, o.stops)
		reason, err := sv.Complete(context.Background(), prompt, o.smp, o.maxTokens, func(tok serve.Token) error {
			text, _, stopped := ts.Add(tok)
			b.WriteString(strings.ToValidUTF8(text, "\uFFFD")) // (as generateChat gives each piece)
			if stopped {
				return serve.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := ts.End()
		return b.String() + strings.ToValidUTF8(rest, "\uFFFD"), reason
	}
	sid, err := openSession(m.id)
	if err != nil {
		t.Fatal(err)
	}
	chat := []tokenizer.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Tell me about the sea."}}
	for _, o := range []genOptions{
		{maxTokens: 20},
		{maxTokens: 20, smp: serve.Sampler{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 3}},
		{maxTokens: 30, smp: serve.Sampler{Temperature: 1.2, Seed: 9}, stops: []string{"e"}},
	} {
		got, finish := generate(t, sid, chat, o)
		text, reason := want(chat, o)
		if got != text || (reason == "stop") != (finish == finishStop) {
			t.Errorf("%+v: %q (%d), the service's %q (%s)", o, got, finish, text, reason)
		}
		// the next turn in the same session computes only what is new, and writes the same
		next := append(slices.Clone(chat), tokenizer.Message{Role: "assistant", Content: got}, tokenizer.Message{Role: "user", Content: "And rivers?"})
		got2, _ := generate(t, sid, next, o)
		st, _, _, _, err := statsOf(sid)
		if err != nil {
			t.Fatal(err)
		}
		if text2, _ := want(next, o); got2 != text2 || st.cachedTokens == 0 {
			t.Errorf("%+v, second turn: %q, the service's %q; %d cached", o, got2, text2, st.cachedTokens)
		}
	}
}

// A chat too long for the context loses its oldest turns after the system messages, a
// question and its answer together; the last message stays, and one that cannot fit is an
// error.
func TestFitChat(t *testing.T) {
	m := openFixture(t, "tiny-qwen3-f32", openOptions{threads: 2, context: 256})
	var msgs []tokenizer.Message
	msgs = append(msgs, tokenizer.Message{Role: "system", Content: "Be brief."}, tokenizer.Message{Role: "system", Content: "Be kind."})
	for i := range 21 { // ending with a user turn
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, tokenizer.Message{Role: role, Content: strings.Repeat("word ", 5+i)})
	}
	full, err := m.tk.EncodeChat(msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	least, err := m.tk.EncodeChat(append(slices.Clone(msgs[:2]), msgs[len(msgs)-1]), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{len(full), len(full) - 1, len(full) / 2, len(least)} {
		prompt, dropped, err := fitChat(m.tk, msgs, budget)
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		kept := append(slices.Clone(msgs[:2]), msgs[2+dropped:]...)
		want, _ := m.tk.EncodeChat(kept, nil)
		if len(prompt) > budget || !slices.Equal(prompt, want) || dropped%2 != 0 || (budget < len(full)) != (dropped > 0) {
			t.Errorf("budget %d: %d tokens, %d messages dropped", budget, len(prompt), dropped)
		}
		if dropped > 0 { // the turn before would not have fitted
			longer := append(slices.Clone(msgs[:2]), msgs[dropped:]...)
			if p, _ := m.tk.EncodeChat(longer, nil); len(p) <= budget {
				t.Errorf("budget %d: %d messages dropped, %d fewer fit", budget, dropped, 2)
			}
		}
	}
	if _, _, err := fitChat(m.tk, msgs, len(least)-1); codeOf(err) != codeContext {
		t.Errorf("a budget too small: %v", err)
	}
}

// Handles are never reused; a closed session's and model's handles stay invalid; a session
// runs one call at a time.
func TestHandles(t *testing.T) {
	m := openFixture(t, "tiny-qwen3-f32", openOptions{threads: 1, context: 64})
	a, err := openSession(m.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeSession(a); err != nil {
		t.Fatal(err)
	}
	b, err := openSession(m.id)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == m.id || b == m.id {
		t.Errorf("handles %d, %d, %d", m.id, a, b)
	}
	for _, err := range []error{closeSession(a), rollback(a, 0), commit(a, nil)} {
		if codeOf(err) != codeHandle {
			t.Errorf("closed session: %v", err)
		}
	}
	s, done, err := reg.useSession(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prefill(b, []int32{1}, false, 0); codeOf(err) != codeBusy {
		t.Errorf("a second call: %v", err)
	}
	if err := closeModel(m.id); codeOf(err) != codeBusy {
		t.Errorf("closing the model during a call: %v", err)
	}
	if _, _, _, _, err := statsOf(s.id); err != nil {
		t.Errorf("stats during a call: %v", err)
	}
	done()
	if _, err := prefill(b, []int32{1}, false, 0); err != nil {
		t.Error(err)
	}
	if err := commit(b, nil); codeOf(err) != codeState {
		t.Errorf("commit without a tree: %v", err)
	}
	if _, err := openModel("/nonexistent.gguf", openOptions{}); codeOf(err) != codeIO {
		t.Errorf("a missing file: %v", err)
	}
}

// Sessions used from several goroutines at once each write the text one session alone
// writes (run it with -race to check the library's locking).
func TestConcurrentSessions(t *testing.T) {
	m := openFixture(t, "tiny-qwen3-f32", openOptions{threads: 2, context: 128, sessions: 4})
	chat := []tokenizer.Message{{Role: "user", Content: "Tell me about the sea."}}
	o := genOptions{maxTokens: 10, smp: serve.Sampler{Temperature: 0.7, Seed: 5}}
	one := func() (string, error) {
		sid, err := openSession(m.id)
		if err != nil {
			return "", err
		}
		defer closeSession(sid)
		var b strings.Builder
		if _, err := generateChat(sid, chat, o, func(s string) bool {
			b.WriteString(s)
			_, _, _, _, err := statsOf(sid)
			return err != nil
		}); err != nil {
			return "", err
		}
		if _, _, err := verifyTree(sid, []int32{1, 2, 3}, []int32{-1, 0, 0}, -1, 3); err != nil {
			return "", err
		}
		return b.String(), commit(sid, []int32{0, 2})
	}
	want, err := one()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = one() })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != want {
			t.Errorf("goroutine %d: %q, %v; alone %q", i, got[i], errs[i], want)
		}
	}
}
