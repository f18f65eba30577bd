package serve_test

import (
	"encoding/json"
	"errors"
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
