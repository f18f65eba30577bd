package serve_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/serve"
	"verity/host/tokenizer"
)

// load builds fixture name's engine over a CPU backend with a prefix cache (as verity serve
// runs by default): every test of the service also checks that sessions whose prompts come
// from the cache behave exactly as computed ones (TestPrefixCacheSessions compares the two).
func load(t testing.TB, name string, o engine.LoadOptions) *engine.Model {
	t.Helper()
	o.PrefixCache = true
	return loadExact(t, name, o)
}

// loadExact is load with o as given.
func loadExact(t testing.TB, name string, o engine.LoadOptions) *engine.Model {
	t.Helper()
	f, err := fixtures.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(2), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// sameTokens reports whether a and b hold the same tokens, log-probabilities and top
// log-probabilities.
func sameTokens(a, b []serve.Token) bool {
	return slices.EqualFunc(a, b, func(x, y serve.Token) bool { return reflect.DeepEqual(x, y) })
}

// plain decodes n tokens after prompt with sampler s, one at a time: the reference a verified
// session must reproduce.
func plain(t *testing.T, m *engine.Model, prompt []int32, s serve.Sampler, n int) []serve.Token {
	t.Helper()
	sess := m.NewSession()
	defer sess.Close()
	l, err := sess.Prefill(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	logits := l[0]
	var out []serve.Token
	for pos := len(prompt); len(out) < n; pos++ {
		tok := s.Choose(logits, pos)
		out = append(out, serve.TokenAt(s, logits, tok))
		if logits, err = sess.Decode(tok); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A verified session emits exactly plain decoding's tokens and log-probabilities, whatever
// the drafts: right continuations, wrong ones, siblings hiding the right token, empty drafts.
func TestVerifiedSessionIsLossless(t *testing.T) {
	for _, c := range []struct {
		fixture    string
		sampler    serve.Sampler
		megakernel bool
	}{
		{"small-llama-q4_k_m", serve.Sampler{}, false},
		{"tiny-q35moe-q4_0", serve.Sampler{}, false},
		{"small-q35moe-q4_k_m", serve.Sampler{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 5, TopLogprobs: 3}, false},
		{"small-llama-q4_k_m", serve.Sampler{Temperature: 1.2, Seed: 9, TopLogprobs: 5}, false},
		{"tiny-q35moe-q4_0", serve.Sampler{Temperature: 0.7, Seed: 2}, true}, // every step a megakernel stream
	} {
		t.Run(fmt.Sprintf("%s/T=%v/megakernel=%v", c.fixture, c.sampler.Temperature, c.megakernel), func(t *testing.T) {
			m := load(t, c.fixture, engine.LoadOptions{MaxRows: 16, Context: 128, Megakernel: c.megakernel, MegakernelSMs: 3})
			nv := m.Program().Config.NVocab
			r := rand.New(rand.NewPCG(3, 4))
			prompt := make([]int32, 11)
			for i := range prompt {
				prompt[i] = int32(r.IntN(nv))
			}
			want := plain(t, m, prompt, c.sampler, 40)

			sv := serve.New(m.Engine, serve.Options{})
			defer sv.Shutdown()
			op, err := sv.Open(prompt, c.sampler)
			if err != nil {
				t.Fatal(err)
			}
			got := []serve.Token{op.Next}
			pos := op.Position
			accepted := 0
			for round := 0; len(got) < len(want); round++ {
				// the true continuation after the emitted tokens, to build drafts from
				truth := want[min(len(got), len(want)-1):]
				var d serve.Draft
				switch round % 4 {
				case 0: // a right chain
					for i := 0; i < min(5, len(truth)); i++ {
						d.Tokens = append(d.Tokens, truth[i].ID)
						d.Parents = append(d.Parents, i-1)
					}
				case 1: // wrong tokens first, the right one as a later sibling, then a child
					d.Tokens = []int32{int32(r.IntN(nv)), int32(r.IntN(nv)), truth[0].ID, truth[min(1, len(truth)-1)].ID}
					d.Parents = []int{-1, -1, -1, 2}
				case 2: // random tree
					for i := 0; i < 7; i++ {
						d.Tokens = append(d.Tokens, int32(r.IntN(nv)))
						d.Parents = append(d.Parents, r.IntN(i+1)-1)
					}
				case 3: // no draft: one plain step
				}
				d.Position = pos
				v, err := sv.Verify(op.Session, d)
				if err != nil {
					t.Fatal(err)
				}
				if round%4 == 0 && len(v.Accepted) < len(d.Tokens) && len(got)+len(d.Tokens) < len(want) {
					t.Errorf("round %d: the right chain of %d was accepted only %d deep", round, len(d.Tokens), len(v.Accepted))
				}
				accepted += len(v.Accepted)
				got = append(append(got, v.Tokens...), v.Next)
				if v.Position != pos+len(v.Tokens)+1 {
					t.Fatalf("round %d: position %d, want %d", round, v.Position, pos+len(v.Tokens)+1)
				}
				pos = v.Position
			}
			got = got[:len(want)]
			if !sameTokens(got, want) {
				t.Fatalf("verified session emitted\n%v\nplain decoding\n%v", got, want)
			}
			if accepted == 0 {
				t.Error("no draft token was ever accepted")
			}
			st := sv.Stats()
			if st.Sessions != 1 || st.Accepted != int64(accepted) || st.Rounds == 0 {
				t.Errorf("stats %+v", st)
			}
			var byDepth int64
			for d, n := range st.AcceptedAt {
				byDepth += n
				if d > 0 && n > st.AcceptedAt[d-1] {
					t.Errorf("more rounds accepted depth %d than depth %d: %v", d, d-1, st.AcceptedAt)
				}
			}
			if byDepth != st.Accepted {
				t.Errorf("accepted by depth %v sums to %d, accepted %d", st.AcceptedAt, byDepth, st.Accepted)
			}
		})
	}
}

func TestHTTP(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 1})
	sv := serve.New(m.Engine, serve.Options{ClientSessions: -1, Admission: serve.AdmissionOptions{MaxWait: 50 * time.Millisecond}})
	defer sv.Shutdown()
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()
	call := func(method, path string, body any, out any) int {
		t.Helper()
		var buf bytes.Buffer
		if body != nil {
			if s, ok := body.(string); ok {
				buf.WriteString(s)
			} else if err := json.NewEncoder(&buf).Encode(body); err != nil {
				t.Fatal(err)
			}
		}
		req, _ := http.NewRequest(method, srv.URL+path, &buf)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode < 300 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	prompt := make([]int32, 25) // two such sessions overflow the 40-slot cache
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	var op serve.Opened
	if code := call("POST", "/v1/sessions", map[string]any{"prompt": prompt}, &op); code != 200 {
		t.Fatalf("open: %d", code)
	}
	verify := func(d serve.Draft) int {
		return call("POST", "/v1/sessions/"+op.Session+"/verify", d, nil)
	}
	for _, c := range []struct {
		name string
		code int
	}{
		{"stale", verify(serve.Draft{Position: op.Position - 1})},
		{"too many nodes", verify(serve.Draft{Position: op.Position, Tokens: make([]int32, 8), Parents: make([]int, 8)})},
		{"bad parent", verify(serve.Draft{Position: op.Position, Tokens: []int32{1, 2}, Parents: []int{-1, 1}})},
		{"bad token", verify(serve.Draft{Position: op.Position, Tokens: []int32{1 << 30}, Parents: []int{-1}})},
		{"count mismatch", verify(serve.Draft{Position: op.Position, Tokens: []int32{1}})},
		{"unknown field", call("POST", "/v1/sessions/"+op.Session+"/verify", `{"position": 1, "nodes": []}`, nil)},
		{"not json", call("POST", "/v1/sessions", `{"prompt": [1,`, nil)},
		{"empty prompt", call("POST", "/v1/sessions", map[string]any{"prompt": []int32{}}, nil)},
		{"bad sampler", call("POST", "/v1/sessions", map[string]any{"prompt": prompt, "sampler": map[string]any{"top_p": 2}}, nil)},
		{"prompt past the context", call("POST", "/v1/sessions", map[string]any{"prompt": make([]int32, 33)}, nil)},
		{"cache full", call("POST", "/v1/sessions", map[string]any{"prompt": prompt}, nil)},
		{"unknown session", call("POST", "/v1/sessions/nope/verify", serve.Draft{}, nil)},
	} {
		want := map[string]int{"stale": 409, "too many nodes": 413, "cache full": 503, "unknown session": 404}[c.name]
		if want == 0 {
			want = 400
		}
		if c.code != want {
			t.Errorf("%s: status %d, want %d", c.name, c.code, want)
		}
	}
	// a good round, then the context runs out
	var v serve.Verified
	if code := call("POST", "/v1/sessions/"+op.Session+"/verify", serve.Draft{Position: op.Position, Tokens: []int32{3, 4}, Parents: []int{-1, 0}}, &v); code != 200 {
		t.Fatalf("verify: %d", code)
	}
	for code := 200; code == 200; {
		code = call("POST", "/v1/sessions/"+op.Session+"/verify", serve.Draft{Position: v.Position}, &v)
		if code != 200 && code != 400 {
			t.Fatalf("verify near the end of the context: %d", code)
		}
	}
	var st serve.Stats
	if code := call("GET", "/v1/stats", nil, &st); code != 200 || st.Sessions != 1 || st.Rounds == 0 {
		t.Errorf("stats: %d %+v", code, st)
	}
	if code := call("GET", "/v1/health", nil, &map[string]any{}); code != 200 {
		t.Errorf("health: %d", code)
	}
	if code := call("DELETE", "/v1/sessions/"+op.Session, nil, nil); code != 204 {
		t.Errorf("close: %d", code)
	}
	if code := call("DELETE", "/v1/sessions/"+op.Session, nil, nil); code != 404 {
		t.Errorf("second close: %d", code)
	}
	// the cache is free again
	if code := call("POST", "/v1/sessions", map[string]any{"prompt": prompt}, &op); code != 200 {
		t.Errorf("open after close: %d", code)
	}
}

// Idle sessions are closed and their cache reused.
func TestIdleTimeout(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 1})
	sv := serve.New(m.Engine, serve.Options{IdleTimeout: time.Minute, EvictAfter: -1, Admission: serve.AdmissionOptions{MaxWait: 50 * time.Millisecond}})
	defer sv.Shutdown()
	now := time.Unix(1000, 0)
	serve.SetClock(sv, func() time.Time { return now })
	prompt := make([]int32, 25)
	a, err := sv.Open(prompt, serve.Sampler{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Open(prompt, serve.Sampler{}); !errors.Is(err, serve.ErrQueueTimeout) {
		t.Fatalf("a second session of the whole context fitted a cache of one: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := sv.Open(prompt, serve.Sampler{}); err != nil {
		t.Fatalf("after the first session idled out: %v", err)
	}
	if _, err := sv.Verify(a.Session, serve.Draft{Position: a.Position}); err == nil {
		t.Error("the idle session still answers")
	}
}

// Sessions verifying concurrently are batched into shared steps and each still emits exactly
// its plain decoding.
func TestConcurrentSessionsAreLossless(t *testing.T) {
	const sessions, tokens = 6, 24
	m := load(t, "tiny-q35moe-q4_0", engine.LoadOptions{MaxRows: 32, Context: 64, Sessions: sessions})
	nv := m.Program().Config.NVocab
	sv := serve.New(m.Engine, serve.Options{MaxNodes: 6})
	defer sv.Shutdown()
	smp := serve.Sampler{Temperature: 0.7, Seed: 21}
	prompts := make([][]int32, sessions)
	wants := make([][]serve.Token, sessions)
	r := rand.New(rand.NewPCG(5, 6))
	for k := range prompts {
		prompts[k] = make([]int32, 5+k)
		for i := range prompts[k] {
			prompts[k][i] = int32(r.IntN(nv))
		}
		wants[k] = plain(t, m, prompts[k], smp, tokens)
	}
	errs := make(chan error, sessions)
	for k := 0; k < sessions; k++ {
		go func() {
			errs <- func() error {
				r := rand.New(rand.NewPCG(uint64(k), 1))
				op, err := sv.Open(prompts[k], smp)
				if err != nil {
					return err
				}
				got, pos := []serve.Token{op.Next}, op.Position
				for len(got) < tokens {
					truth := wants[k][min(len(got), tokens-1):]
					d := serve.Draft{Position: pos}
					for i := 0; i < min(1+r.IntN(5), len(truth)); i++ {
						tok := truth[i].ID
						if r.IntN(4) == 0 {
							tok = int32(r.IntN(nv))
						}
						d.Tokens, d.Parents = append(d.Tokens, tok), append(d.Parents, i-1)
					}
					v, err := sv.Verify(op.Session, d)
					if err != nil {
						return err
					}
					got, pos = append(append(got, v.Tokens...), v.Next), v.Position
				}
				if !sameTokens(got[:tokens], wants[k]) {
					return fmt.Errorf("session %d emitted %v, plain decoding %v", k, got[:tokens], wants[k])
				}
				return sv.Close(op.Session)
			}()
		}()
	}
	for k := 0; k < sessions; k++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st := sv.Stats()
	if st.Steps > st.Rounds || st.Sessions != 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d verify rounds in %d steps", st.Rounds, st.Steps)
}

// Speculative sampling end to end. A drafter that is the target itself (its distributions
// computed by decoding the draft chain on the same model) has every drafted token accepted —
// exactly, since verified logits are bit-identical to decoded ones and so p = q — which also
// shows each node is judged with its own logits and position. At temperature 0 the rule
// reproduces plain greedy decoding whatever the drafts. Malformed distributions get ErrBad.
func TestSpeculativeSampling(t *testing.T) {
	m := load(t, "small-llama-q4_k_m", engine.LoadOptions{MaxRows: 16, Context: 256, Sessions: 2})
	nv := m.Program().Config.NVocab
	r := rand.New(rand.NewPCG(5, 6))
	prompt := make([]int32, 9)
	for i := range prompt {
		prompt[i] = int32(r.IntN(nv))
	}
	// drafterDists decodes chain after tokens and returns the sampler's distribution before
	// each chain token and after the last.
	drafterDists := func(smp serve.Sampler, tokens []int32, chain []int32) []serve.Dist {
		s := m.NewSession()
		defer s.Close()
		l, err := s.Prefill(tokens, false)
		if err != nil {
			t.Fatal(err)
		}
		out := []serve.Dist{smp.Dist(l[0])}
		for _, x := range chain {
			lg, err := s.Decode(x)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, smp.Dist(lg))
		}
		return out
	}
	draw := func(d serve.Dist) int32 {
		u := r.Float64()
		for i, p := range d.Probs {
			if u < p {
				return d.Tokens[i]
			}
			u -= p
		}
		return d.Tokens[len(d.Tokens)-1]
	}

	smp := serve.Sampler{Temperature: 0.9, TopK: 20, Seed: 11}
	sv := serve.New(m.Engine, serve.Options{})
	defer sv.Shutdown()
	op, err := sv.Open(prompt, smp)
	if err != nil {
		t.Fatal(err)
	}
	emitted := append(append([]int32(nil), prompt...), op.Next.ID)
	pos := op.Position
	for round := 0; round < 8; round++ {
		// the drafter samples a chain of 4 from its own (the target's) distributions
		var chain []int32
		for i := 0; i < 4; i++ {
			ds := drafterDists(smp, emitted, chain)
			chain = append(chain, draw(ds[len(ds)-1]))
		}
		d := serve.Draft{Position: pos, Tokens: chain, Parents: []int{-1, 0, 1, 2}, Dists: drafterDists(smp, emitted, chain)}
		v, err := sv.Verify(op.Session, d)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.Accepted, []int{0, 1, 2, 3}) {
			t.Fatalf("round %d: the target's own samples were accepted as %v", round, v.Accepted)
		}
		for i, tok := range v.Tokens {
			emitted = append(emitted, tok.ID)
			if tok.ID != chain[i] {
				t.Fatalf("round %d: accepted token %d is %d, drafted %d", round, i, tok.ID, chain[i])
			}
		}
		emitted = append(emitted, v.Next.ID)
		pos = v.Position
	}

	// temperature 0: greedy decoding, with random drafts and distributions
	want := plain(t, m, prompt, serve.Sampler{}, 30)
	op, err = sv.Open(prompt, serve.Sampler{})
	if err != nil {
		t.Fatal(err)
	}
	got := []serve.Token{op.Next}
	pos = op.Position
	for len(got) < len(want) {
		truth := want[min(len(got), len(want)-1)]
		d := serve.Draft{Position: pos, Tokens: []int32{int32(r.IntN(nv)), truth.ID}, Parents: []int{-1, -1}}
		if d.Tokens[0] == truth.ID {
			d.Tokens[0] = (truth.ID + 1) % int32(nv)
		}
		for range 3 {
			d.Dists = append(d.Dists, serve.Dist{Tokens: []int32{d.Tokens[0], d.Tokens[1]}, Probs: []float64{0.6, 0.3}})
		}
		v, err := sv.Verify(op.Session, d)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(got, v.Tokens...), v.Next)
		pos = v.Position
	}
	if got = got[:len(want)]; !sameTokens(got, want) {
		t.Fatalf("greedy speculative sampling emitted\n%v\nplain decoding\n%v", got, want)
	}

	for _, bad := range []serve.Draft{
		{Tokens: []int32{1}, Parents: []int{-1}, Dists: []serve.Dist{{Tokens: []int32{1}, Probs: []float64{1}}}},                                                                                              // one distribution too few
		{Tokens: []int32{1}, Parents: []int{-1}, Dists: []serve.Dist{{Tokens: []int32{2}, Probs: []float64{1}}, {Tokens: []int32{2}, Probs: []float64{1}}}},                                                   // root not in its distribution
		{Tokens: []int32{1, 1}, Parents: []int{-1, -1}, Dists: []serve.Dist{{Tokens: []int32{1}, Probs: []float64{1}}, {Tokens: []int32{1}, Probs: []float64{1}}, {Tokens: []int32{1}, Probs: []float64{1}}}}, // repeated siblings
		{Tokens: []int32{1}, Parents: []int{-1}, Dists: []serve.Dist{{Tokens: []int32{1}, Probs: []float64{2}}, {Tokens: []int32{1}, Probs: []float64{1}}}},                                                   // sums past 1
	} {
		bad.Position = pos
		if _, err := sv.Verify(op.Session, bad); !errors.Is(err, serve.ErrBad) {
			t.Errorf("draft %+v: error %v, want ErrBad", bad, err)
		}
	}
}

// A prompt given as text opens the session its token ids open; without a tokenizer, or with
// both forms, it is refused.
func TestHTTPText(t *testing.T) {
	const name = "tiny-llama-q8_0"
	tk := fixtureTokenizer(t, name)
	m := load(t, name, engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2})
	for _, withTokenizer := range []bool{true, false} {
		o := serve.Options{}
		if withTokenizer {
			o.Tokenizer = tk
		}
		sv := serve.New(m.Engine, o)
		srv := httptest.NewServer(sv.Handler())
		open := func(body string) (int, serve.Opened) {
			resp, err := http.Post(srv.URL+"/v1/sessions", "application/json", bytes.NewBufferString(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var op serve.Opened
			if resp.StatusCode == 200 {
				if err := json.NewDecoder(resp.Body).Decode(&op); err != nil {
					t.Fatal(err)
				}
				if code, _ := callDelete(t, srv.URL+"/v1/sessions/"+op.Session); code != 204 {
					t.Fatalf("close: %d", code)
				}
			}
			return resp.StatusCode, op
		}
		const text = "<|begin_of_text|>Hello world"
		code, byText := open(`{"text": "` + text + `"}`)
		if !withTokenizer {
			if code != 400 {
				t.Errorf("text without a tokenizer: status %d, want 400", code)
			}
		} else {
			ids := tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: true})
			body, _ := json.Marshal(map[string]any{"prompt": ids})
			_, byIDs := open(string(body))
			if code != 200 || byText.Position != len(ids)+1 || !reflect.DeepEqual(byText.Next, byIDs.Next) {
				t.Errorf("text: status %d, %+v; ids %v: %+v", code, byText, ids, byIDs)
			}
			if ids[1] != tk.BOS() {
				t.Errorf("the BOS written in the text was not recognised: %v", ids)
			}
		}
		if code, _ := open(`{"text": "x", "prompt": [1]}`); code != 400 {
			t.Errorf("text and prompt: status %d, want 400", code)
		}
		srv.Close()
		sv.Shutdown()
	}
}

func callDelete(t *testing.T, url string) (int, error) {
	req, _ := http.NewRequest("DELETE", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A session whose prompt begins with an earlier, closed session's tokens takes them from the
// prefix cache ("cached" positions) and emits exactly what it would without the cache, where
// a service without one computes every position.
func TestPrefixCacheSessions(t *testing.T) {
	for _, name := range []string{"small-llama-q4_k_m", "tiny-q35moe-q4_0"} {
		t.Run(name, func(t *testing.T) {
			o := engine.LoadOptions{MaxRows: 8, Context: 96, Sessions: 2}
			warm := load(t, name, o)
			cold := loadExact(t, name, o)
			nv := warm.Program().Config.NVocab
			r := rand.New(rand.NewPCG(8, 9))
			smp := serve.Sampler{Temperature: 0.9, Seed: 4, TopLogprobs: 2}
			sv := serve.New(warm.Engine, serve.Options{})
			defer sv.Shutdown()
			sc := serve.New(cold.Engine, serve.Options{})
			defer sc.Shutdown()
			// run opens a session on service s, verifies right chains drafted from plain
			// decoding for n tokens, closes it, and returns its open reply and its tokens.
			run := func(s *serve.Service, prompt []int32, n int) (serve.Opened, []int32) {
				want := plain(t, cold, prompt, smp, n)
				op, err := s.Open(prompt, smp)
				if err != nil {
					t.Fatal(err)
				}
				got := []serve.Token{op.Next}
				for pos := op.Position; len(got) < n; {
					d := serve.Draft{Position: pos}
					for i, tok := range want[len(got):min(len(got)+3, n)] {
						d.Tokens, d.Parents = append(d.Tokens, tok.ID), append(d.Parents, i-1)
					}
					v, err := s.Verify(op.Session, d)
					if err != nil {
						t.Fatal(err)
					}
					got, pos = append(append(got, v.Tokens...), v.Next), v.Position
				}
				if !sameTokens(got[:n], want) {
					t.Fatalf("prompt of %d: emitted %v, plain decoding %v", len(prompt), got[:n], want)
				}
				if err := s.Close(op.Session); err != nil {
					t.Fatal(err)
				}
				toks := slices.Clone(prompt)
				for _, tk := range got {
					toks = append(toks, tk.ID)
				}
				return op, toks
			}
			prompt := randTokens(r, 17, nv)
			first, hist := run(sv, prompt, 12)
			if first.Cached != 0 {
				t.Errorf("first session: %d cached positions", first.Cached)
			}
			// the next turn: the whole history and more; then a prompt sharing a part of it
			for _, p := range [][]int32{append(slices.Clone(hist[:25]), randTokens(r, 4, nv)...), append(slices.Clone(prompt[:10]), randTokens(r, 5, nv)...)} {
				op, _ := run(sv, p, 10)
				opCold, _ := run(sc, p, 10)
				if opCold.Cached != 0 || !reflect.DeepEqual(op.Next, opCold.Next) {
					t.Errorf("prompt of %d: with the cache %+v, without %+v", len(p), op, opCold)
				}
				if op.Cached == 0 && len(p) == 29 {
					t.Errorf("prompt of %d: nothing cached", len(p))
				}
				t.Logf("prompt of %d: %d positions from the cache", len(p), op.Cached)
			}
			if st := sv.Stats().PrefixCache; st.Hits == 0 || st.Reused == 0 {
				t.Errorf("prefix cache stats %+v", st)
			}
			if st := sc.Stats().PrefixCache; st != (engine.PrefixStats{}) {
				t.Errorf("a service without a prefix cache reports %+v", st)
			}
		})
	}
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}
