package engine

import (
	"cmp"
	"slices"
)

// The prefix cache. When a session closes, its committed tokens and the K/V slots holding
// them stay referenced by a cached prefix, and for recurrent models so do a few of its states
// (before the prompt's last token — where an exact repeat of the prompt starts —, its last
// checkpoints and its end). A new session's prompt that begins
// with a cached prefix's tokens takes references to those slots — and, for a recurrent model,
// the state at the furthest kept position within the common part — and computes only the
// rest. A position's K/V entry and a state depend only on the tokens up to them (width
// invariance: not on how they were chunked or batched), so the session's logits are the same
// bits as without the cache. Prefixes occupy only slots no session holds: allocating evicts
// the least recently used ones first.

// maxPrefixStates is the most recurrent states a cached prefix keeps.
const maxPrefixStates = 8

// prefixEntry is one cached prefix. It holds a reference to each of its slots and states.
type prefixEntry struct {
	tokens []int32
	slots  []int32      // the K/V slot of each position
	states []checkpoint // states after some positions, by increasing position
	used   uint64       // the cache's clock when last added or matched
}

type prefixCache struct {
	entries []*prefixEntry
	clock   uint64
	stats   PrefixStats
}

// PrefixStats describe an engine's prefix cache.
type PrefixStats struct {
	Entries int   `json:"entries"` // cached prefixes
	Tokens  int   `json:"tokens"`  // their positions in all (shared slots counted once per prefix)
	Hits    int64 `json:"hits"`    // prompts that began with a cached prefix
	Misses  int64 `json:"misses"`  // prompts that did not
	Reused  int64 `json:"reused"`  // prompt positions taken from the cache instead of computed
	Evicted int64 `json:"evicted"` // prefixes dropped to free slots
}

// prefixHit is what match hands a session: the first n positions' slots and the state after
// them, with a reference to each.
type prefixHit struct {
	n     int
	slots []int32
	state int32
}

// release gives back a hit's references (a prefill that failed).
func (h prefixHit) release(e *Engine) {
	e.release(h.slots)
	e.releaseStates(h.state)
}

// match finds the cached prefix sharing the most leading tokens with prompt (for a recurrent
// model, up to the furthest position with a kept state), at most all but prompt's last token
// (whose logits the prefill must compute). The caller holds e.mu.
func (c *prefixCache) match(e *Engine, prompt []int32) prefixHit {
	if c == nil {
		return prefixHit{}
	}
	var best *prefixEntry
	var hit prefixHit
	for _, x := range c.entries {
		n := 0
		for n < min(len(x.tokens), len(prompt)-1) && x.tokens[n] == prompt[n] {
			n++
		}
		state := int32(0)
		if e.recurrent {
			m := 0
			for _, st := range x.states {
				if st.pos <= n {
					m, state = st.pos, st.slot
				}
			}
			n = m
		}
		if n > hit.n || (n == hit.n && best != nil && x.used > best.used) {
			best, hit = x, prefixHit{n: n, state: state}
		}
	}
	if hit.n == 0 {
		c.stats.Misses++
		return prefixHit{}
	}
	c.clock++
	best.used = c.clock
	hit.slots = slices.Clone(best.slots[:hit.n])
	e.retain(hit.slots)
	e.retainStates(hit.state)
	c.stats.Hits++
	c.stats.Reused += int64(hit.n)
	return hit
}

// keep caches what closing session s computed (the caller holds e.mu; s still holds its
// references, which Close then drops).
func (c *prefixCache) keep(s *Session) {
	if c == nil || len(s.slots) == 0 {
		return
	}
	e := s.e
	x := &prefixEntry{tokens: slices.Clone(s.tokens), slots: slices.Clone(s.slots)}
	if e.recurrent {
		kept := append(slices.Clone(s.checkpoints), checkpoint{pos: len(s.tokens), slot: s.state}, s.prompt)
		for _, st := range kept {
			x.states = addState(e, x.states, st)
		}
	}
	e.retain(x.slots)
	// A prefix whose tokens begin another's is redundant (the same tokens give the same
	// entries): the longer one keeps both's states.
	for i := 0; i < len(c.entries); i++ {
		y := c.entries[i]
		switch {
		case isPrefix(y.tokens, x.tokens):
			x.states = mergeStates(e, x.states, y)
			c.entries = slices.Delete(c.entries, i, i+1)
			i--
		case isPrefix(x.tokens, y.tokens):
			y.states = mergeStates(e, y.states, x)
			c.clock++
			y.used = c.clock
			return
		}
	}
	c.clock++
	x.used = c.clock
	c.entries = append(c.entries, x)
}

// addState adds a reference to state st to list (by increasing position), unless it is the
// zero state or its position is there already; beyond maxPrefixStates the second earliest goes
// (the earliest is often the first prompt's end, which a conversation's later turns share).
func addState(e *Engine, list []checkpoint, st checkpoint) []checkpoint {
	if st.slot <= 0 || slices.ContainsFunc(list, func(c checkpoint) bool { return c.pos == st.pos }) {
		return list
	}
	e.retainStates(st.slot)
	list = append(list, st)
	slices.SortFunc(list, func(a, b checkpoint) int { return cmp.Compare(a.pos, b.pos) })
	if len(list) > maxPrefixStates {
		e.releaseStates(list[1].slot)
		list = slices.Delete(list, 1, 2)
	}
	return list
}

// mergeStates adds redundant prefix y's states to list and releases y.
func mergeStates(e *Engine, list []checkpoint, y *prefixEntry) []checkpoint {
	for _, st := range y.states {
		list = addState(e, list, st)
	}
	y.drop(e)
	return list
}

func (x *prefixEntry) drop(e *Engine) {
	e.release(x.slots)
	for _, st := range x.states {
		e.releaseStates(st.slot)
	}
}

func isPrefix(a, b []int32) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

// evict drops the least recently used prefix to free slots; false when there is none. The
// caller holds e.mu.
func (c *prefixCache) evict(e *Engine) bool {
	if c.drop(e) {
		c.stats.Evicted++
		return true
	}
	return false
}

// drop drops the least recently used prefix; false when there is none.
func (c *prefixCache) drop(e *Engine) bool {
	if c == nil || len(c.entries) == 0 {
		return false
	}
	i := 0
	for j, x := range c.entries {
		if x.used < c.entries[i].used {
			i = j
		}
	}
	c.entries[i].drop(e)
	c.entries = slices.Delete(c.entries, i, i+1)
	return true
}

// PrefixStats returns the prefix cache's counters (zero without one).
func (e *Engine) PrefixStats() PrefixStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prefix == nil {
		return PrefixStats{}
	}
	st := e.prefix.stats
	st.Entries = len(e.prefix.entries)
	for _, x := range e.prefix.entries {
		st.Tokens += len(x.tokens)
	}
	return st
}

// DropPrefixes empties the prefix cache, freeing the slots only it held.
func (e *Engine) DropPrefixes() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.prefix.drop(e) {
	}
}
