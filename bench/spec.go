package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"verity/host/engine"
)

// SpecTime is speculative decoding with synthetic drafts (Options.Spec): how fast a given
// acceptance profile generates, against decoding one token per step.
type SpecTime struct {
	// Rates are the draft chain's acceptance probabilities by depth: the drafted token at
	// depth i is the target's own with probability Rates[i], else one the target would not
	// choose; a round accepts the longest right prefix.
	Rates        []float64 `json:"rates"`
	Tokens       int       `json:"tokens"`        // generated (the first, by the prefill, untimed)
	Rounds       int       `json:"rounds"`        // verify steps
	Drafted      int       `json:"drafted"`       // draft tokens verified
	MeanAccepted float64   `json:"mean_accepted"` // draft tokens accepted per round
	TPS          float64   `json:"tok_s"`         // tokens after the first per second, speculative
	PlainTPS     float64   `json:"plain_tok_s"`   // the same, one decode step per token
	Speedup      float64   `json:"speedup"`       // TPS / PlainTPS
}

// Speculate generates n greedy tokens after prompt on e twice: one decode step per token, and
// speculatively — each step verifies the pending token and a chain of len(rates) synthetic
// draft tokens (see SpecTime.Rates; the right ones known from the first run) and commits the
// accepted path, as the verify service does. Because verified logits are decoding's to the
// bit, both runs must generate the same tokens; a difference is an error.
func Speculate(e *engine.Engine, prompt []int32, n int, rates []float64, seed uint64) (SpecTime, error) {
	st := SpecTime{Rates: rates, Tokens: n}
	if n < 2 || len(rates) < 1 || len(rates)+1 > e.MaxRows() {
		return st, fmt.Errorf("bench: speculation: %d tokens with drafts of %d: want ≥ 2 tokens and 1 … %d draft tokens", n, len(rates), e.MaxRows()-1)
	}
	for _, p := range rates {
		if !(p >= 0 && p <= 1) {
			return st, fmt.Errorf("bench: speculation: acceptance rate %v: want 0 … 1", p)
		}
	}
	if len(prompt)+n+len(rates)+1 > e.Context() {
		return st, fmt.Errorf("bench: speculation: %d prompt + %d generated + %d draft tokens exceed the context of %d", len(prompt), n, len(rates)+1, e.Context())
	}
	nv := e.Program().Config.NVocab

	// decoding: the target's tokens, one step each
	s := e.NewSession()
	l, err := s.Prefill(prompt, false)
	if err != nil {
		s.Close()
		return st, err
	}
	plainStart := time.Now()
	truth := []int32{greedy(l[0])}
	for len(truth) < n {
		d, err := s.Decode(truth[len(truth)-1])
		if err != nil {
			s.Close()
			return st, err
		}
		truth = append(truth, greedy(d))
	}
	plain := time.Since(plainStart)
	s.Close()

	// speculation: each step the pending token and a synthetic draft chain after it
	r := rand.New(rand.NewPCG(seed, 7))
	s = e.NewSession()
	defer s.Close()
	if l, err = s.Prefill(prompt, false); err != nil {
		return st, err
	}
	specStart := time.Now()
	got := []int32{greedy(l[0])}
	accepted := 0
	for len(got) < n {
		tree := engine.Tree{Tokens: []int32{got[len(got)-1]}, Parents: []int{-1}}
		for i := range rates {
			at := len(got) + i
			if at >= n {
				break
			}
			tok := truth[at]
			if r.Float64() >= rates[i] {
				tok = (tok + 1) % int32(nv) // a token the target does not choose here
			}
			tree.Tokens = append(tree.Tokens, tok)
			tree.Parents = append(tree.Parents, i)
		}
		out, err := s.Verify(tree)
		if err != nil {
			return st, err
		}
		path, cur := []int{0}, 0
		for cur+1 < len(tree.Tokens) && tree.Tokens[cur+1] == greedy(out[cur]) {
			cur++
			path = append(path, cur)
		}
		if err := s.Commit(path); err != nil {
			return st, err
		}
		st.Rounds++
		st.Drafted += len(tree.Tokens) - 1
		accepted += cur
		got = append(append(got, tree.Tokens[1:cur+1]...), greedy(out[cur]))
	}
	spec := time.Since(specStart)
	got = got[:n]
	for i := range got {
		if got[i] != truth[i] {
			return st, fmt.Errorf("bench: speculation emitted token %d at position %d, decoding %d", got[i], i, truth[i])
		}
	}
	st.MeanAccepted = float64(accepted) / float64(st.Rounds)
	st.TPS = float64(n-1) / spec.Seconds()
	st.PlainTPS = float64(n-1) / plain.Seconds()
	st.Speedup = st.TPS / st.PlainTPS
	return st, nil
}
