package serve

import "time"

// TokenAt exposes Sampler.token to the tests.
func TokenAt(s Sampler, logits []float32, tok int32) Token { return s.token(logits, tok) }

// SetClock replaces the service's clock.
func SetClock(sv *Service, now func() time.Time) { sv.now = now }

// JSONPrefix reports whether text continues a JSON object as JSON mode recognises it, and
// whether the object is closed.
func JSONPrefix(text []byte) (ok, done bool) { return jsonAccepts(text) }

// SetRoundHook makes every verify round call f first (nil: none).
func SetRoundHook(sv *Service, f func()) {
	sv.mu.Lock()
	sv.roundHook = f
	sv.mu.Unlock()
}

// SetOpenHook makes every open call f once it has its cache space (nil: none).
func SetOpenHook(sv *Service, f func()) {
	sv.mu.Lock()
	sv.openHook = f
	sv.mu.Unlock()
}

// SetFreeOSMemory replaces debug.FreeOSMemory for the test, restoring it at its end.
func SetFreeOSMemory(t interface{ Cleanup(func()) }, f func()) {
	old := freeOSMemory
	freeOSMemory = f
	t.Cleanup(func() { freeOSMemory = old })
}
