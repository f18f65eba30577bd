package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"verity/host/engine"
	"verity/host/tokenizer"
)

// maxBody bounds a request body (a prompt of a few hundred thousand tokens as JSON).
const maxBody = 8 << 20

// Handler serves the service over HTTP with JSON bodies:
//
//	POST   /v1/sessions               {"prompt": [ids], "sampler": {…}}  → Opened
//	                                  or {"text": "…", …}: tokenized by Options.Tokenizer
//	POST   /v1/sessions/{id}/verify   Draft                               → Verified
//	DELETE /v1/sessions/{id}                                              → 204
//	POST   /v1/completions            CompletionRequest (OpenAI's)        → Completion, or server-sent events
//	POST   /v1/chat/completions       ChatRequest (OpenAI's)              → ChatCompletion, or server-sent events
//	GET    /v1/stats                                                      → Stats
//	GET    /v1/health                                                     → {"model": …, …}
//	GET    /v1/models                                                     → OpenAI's model list (one)
//
// Errors are {"error": "…"} with 400 (malformed request), 404 (unknown session), 409 (stale
// position), 413 (too many tokens: prompt, draft or context), 503 (cache full).
func (sv *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt  []int32 `json:"prompt"`
			Text    *string `json:"text"`
			Sampler Sampler `json:"sampler"`
		}
		if !decode(w, r, &req) {
			return
		}
		if req.Text != nil {
			ids, err := sv.tokenize(*req.Text, req.Prompt)
			if err != nil {
				reply(w, nil, err)
				return
			}
			req.Prompt = ids
		}
		out, err := sv.Open(req.Prompt, req.Sampler)
		reply(w, out, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/verify", func(w http.ResponseWriter, r *http.Request) {
		var d Draft
		if !decode(w, r, &d) {
			return
		}
		out, err := sv.Verify(r.PathValue("id"), d)
		reply(w, out, err)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := sv.Close(r.PathValue("id")); err != nil {
			reply(w, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/completions", sv.handleCompletion)
	mux.HandleFunc("POST /v1/chat/completions", sv.handleChat)
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		reply(w, sv.Stats(), nil)
	})
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		c := sv.e.Program().Config
		h := map[string]any{"arch": c.Arch, "vocab": c.NVocab, "context": sv.e.Context(),
			"max_draft_nodes": sv.opt.MaxNodes, "backend": sv.e.Executor().Name()}
		if sv.opt.Tokenizer != nil {
			h["tokenizer"] = sv.opt.Tokenizer.String()
		}
		reply(w, h, nil)
	})
	// OpenAI's model list, which clients read before their first request.
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"object": "list", "data": []map[string]any{
			{"id": sv.opt.ModelName, "object": "model", "created": sv.started.Unix(), "owned_by": "verity"},
		}}, nil)
	})
	return mux
}

// tokenize turns a session's text prompt into ids as a chat client's prompt is tokenized: BOS
// where the model asks for it, and special tokens written in the text (a chat template's
// <|im_start|>, …) recognised.
func (sv *Service) tokenize(text string, ids []int32) ([]int32, error) {
	if ids != nil {
		return nil, fmt.Errorf("%w: give prompt or text, not both", ErrBad)
	}
	tk := sv.opt.Tokenizer
	if tk == nil {
		return nil, fmt.Errorf("%w: this service has no tokenizer: give the prompt as token ids", ErrBad)
	}
	// No token covers more than MaxPieceBytes of text: a longer text cannot fit the prompt
	// limit, and is refused before the work of encoding it.
	if limit := sv.opt.MaxPrompt * tk.MaxPieceBytes(); len(text) > limit {
		return nil, fmt.Errorf("%w: a text of %d bytes is more than a prompt of at most %d tokens can hold", ErrTooLarge, len(text), sv.opt.MaxPrompt)
	}
	return tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: true}), nil
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(w, nil, fmt.Errorf("%w: body over %d bytes", ErrTooLarge, maxBody))
		} else {
			reply(w, nil, fmt.Errorf("%w: %v", ErrBad, err))
		}
		return false
	}
	return true
}

// statusOf is the HTTP status of an error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrNoSession):
		return http.StatusNotFound
	case errors.Is(err, ErrStale):
		return http.StatusConflict
	case errors.Is(err, ErrTooLarge), errors.Is(err, engine.ErrContext):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, engine.ErrCapacity):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrBad):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(statusOf(err))
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	b, err := json.Marshal(v)
	if err != nil { // nothing written yet: the client gets an error, not an empty 200
		reply(w, nil, fmt.Errorf("serve: encode reply: %w", err))
		return
	}
	w.Write(append(b, '\n'))
}
