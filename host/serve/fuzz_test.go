package serve_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"verity/host/engine"
	"verity/host/serve"
)

// Any verify request body either fails cleanly or verifies, and the session stays usable: no
// panic, no stuck state, positions consistent.
func FuzzVerify(f *testing.F) {
	for _, seed := range []string{
		`{"position": 6, "tokens": [1, 2, 3], "parents": [-1, 0, 0]}`,
		`{"position": 6, "tokens": [], "parents": []}`,
		`{"position": 6, "tokens": [5], "parents": [3]}`,
		`{"position": 6, "tokens": [2147483647], "parents": [-1]}`,
		`{"position": -1}`,
		`{"position": 6, "tokens": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], "parents": [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8]}`,
		`{"position": 6, "tokens": [-3, 4], "parents": [-1, -2]}`,
	} {
		f.Add([]byte(seed))
	}
	m := load(f, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 24})
	sv := serve.New(m.Engine, serve.Options{})
	f.Cleanup(sv.Shutdown)
	f.Fuzz(func(t *testing.T, body []byte) {
		var d serve.Draft
		if json.Unmarshal(body, &d) != nil {
			return
		}
		op, err := sv.Open([]int32{1, 2, 3, 4, 5}, serve.Sampler{})
		if err != nil {
			t.Fatal(err)
		}
		defer sv.Close(op.Session)
		v, err := sv.Verify(op.Session, d)
		pos := op.Position
		switch {
		case err == nil:
			if v.Position != pos+len(v.Tokens)+1 || len(v.Accepted) != len(v.Tokens) {
				t.Fatalf("verified %+v from position %d", v, pos)
			}
			pos = v.Position
		case errors.Is(err, serve.ErrBad), errors.Is(err, serve.ErrStale), errors.Is(err, serve.ErrTooLarge),
			errors.Is(err, engine.ErrContext):
		default:
			t.Fatalf("unclassified error: %v", err)
		}
		if _, err := sv.Verify(op.Session, serve.Draft{Position: pos}); err != nil {
			t.Fatalf("session unusable after %s: %v", body, err)
		}
	})
}

// Any completions request body gets a well-formed reply — a JSON object, or a stream of them
// ending in [DONE] — with a status that says what was wrong, never a panic.
func FuzzCompletions(f *testing.F) {
	for _, seed := range []string{
		`{"prompt": "Hello", "max_tokens": 4}`,
		`{"prompt": [1, 2, 3], "max_tokens": 3, "n": 2, "stream": true, "logprobs": 2}`,
		`{"prompt": "a b", "echo": true, "max_tokens": 0, "logprobs": 1}`,
		`{"prompt": "x", "stop": ["a", "b"], "temperature": 0.7, "seed": 3, "max_tokens": 5}`,
		`{"prompt": "x", "stop": 7}`,
		`{"prompt": [99999999]}`,
		`{"prompt": "x", "n": 100}`,
		`{"messages": [{"role": "user", "content": "hi"}]}`,
		`{"prompt": "Hello there my friend", "n": 8, "stream": true, "max_tokens": 30}`,
		`{"prompt": [[1, 2], "x", [3]], "echo": true, "max_tokens": 1, "logprobs": 5}`,
	} {
		f.Add([]byte(seed))
	}
	const name = "tiny-qwen3-q8_0" // a vocabulary with a chat template
	tk := fixtureTokenizer(f, name)
	m := load(f, name, engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 4})
	sv := serve.New(m.Engine, serve.Options{Tokenizer: tk, ModelName: name})
	f.Cleanup(sv.Shutdown)
	h := sv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
			out := rec.Body.String()
			switch rec.Code {
			case 200:
				if strings.HasPrefix(out, "data: ") {
					events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
					last := events[len(events)-1]
					if last != "data: [DONE]" && !strings.HasPrefix(last, `data: {"error":`) {
						t.Fatalf("%s %s: a stream that ends in neither [DONE] nor an error: %q", path, body, out)
					}
					for _, ev := range events[:len(events)-1] {
						if !json.Valid([]byte(strings.TrimPrefix(ev, "data: "))) {
							t.Fatalf("%s %s: event %q is not JSON", path, body, ev)
						}
					}
					continue
				}
				fallthrough
			case 400, 413, 503:
				if !json.Valid(rec.Body.Bytes()) {
					t.Fatalf("%s %s: status %d with a body that is not JSON: %q", path, body, rec.Code, out)
				}
			default:
				t.Fatalf("%s %s: status %d: %s", path, body, rec.Code, out)
			}
		}
	})
}
