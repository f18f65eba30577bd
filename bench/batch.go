package bench

import (
	"fmt"
	"time"

	"verity/host/engine"
)

// BatchTime is decoding several sessions at once (Options.Batch): every step runs one row for
// each session in one pass over the weights (engine.VerifyBatch, as the verify service batches
// rounds that arrive together).
type BatchTime struct {
	Sessions int     `json:"sessions"`
	Steps    int     `json:"steps"`
	TPS      float64 `json:"tok_s"`             // tokens per second, all sessions together
	StepMS   float64 `json:"ms_per_step"`       // one step of every session's row
	Scaling  float64 `json:"vs_one_session"`    // TPS over one session's decode rate
	PerSess  float64 `json:"tok_s_per_session"` // TPS / Sessions
}

// DecodeBatch decodes steps greedy tokens in each of n sessions (each after its own prompt of
// the prompts' length), one step for all of them at a time, and returns the rate against
// single's (one session's tokens per second; 0 leaves Scaling unset).
func DecodeBatch(e *engine.Engine, prompts [][]int32, steps int, single float64) (BatchTime, error) {
	n := len(prompts)
	bt := BatchTime{Sessions: n, Steps: steps}
	if n < 1 || n > e.MaxRows() || steps < 1 {
		return bt, fmt.Errorf("bench: batched decoding of %d sessions × %d steps: want 1 … %d sessions (the step size)", n, steps, e.MaxRows())
	}
	ss := make([]*engine.Session, n)
	next := make([]int32, n)
	defer func() {
		for _, s := range ss {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, p := range prompts {
		if len(p)+steps+1 > e.Context() {
			return bt, fmt.Errorf("bench: batched decoding: %d prompt + %d steps exceed the context of %d", len(p), steps, e.Context())
		}
		ss[i] = e.NewSession()
		l, err := ss[i].Prefill(p, false)
		if err != nil {
			return bt, fmt.Errorf("bench: batched decoding, session %d of %d: %w", i+1, n, err)
		}
		next[i] = greedy(l[0])
	}
	trees := make([]engine.Tree, n)
	start := time.Now()
	for range steps {
		for i := range trees {
			trees[i] = engine.Tree{Tokens: []int32{next[i]}, Parents: []int{-1}}
		}
		out, err := e.VerifyBatch(ss, trees)
		if err != nil {
			return bt, err
		}
		for i, s := range ss {
			if err := s.Commit([]int{0}); err != nil {
				return bt, err
			}
			next[i] = greedy(out[i][0])
		}
	}
	d := time.Since(start)
	bt.TPS = float64(n*steps) / d.Seconds()
	bt.StepMS = 1e3 * d.Seconds() / float64(steps)
	bt.PerSess = bt.TPS / float64(n)
	if single > 0 {
		bt.Scaling = bt.TPS / single
	}
	return bt, nil
}
