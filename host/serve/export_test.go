package serve

import "time"

// Logprob exposes logprob to the tests.
var Logprob = logprob

// SetClock replaces the service's clock.
func SetClock(sv *Service, now func() time.Time) { sv.now = now }
