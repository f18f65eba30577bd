package serve

import "time"

// TokenAt exposes Sampler.token to the tests.
func TokenAt(s Sampler, logits []float32, tok int32) Token { return s.token(logits, tok) }

// SetClock replaces the service's clock.
func SetClock(sv *Service, now func() time.Time) { sv.now = now }
