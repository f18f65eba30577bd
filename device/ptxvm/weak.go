package ptxvm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
)

// weak.go: the weak-memory mode (Config.Weak). The package doc says what it models; this
// file keeps the state.
//
// An agent is one warp of one block (the warp's lanes act as one thread). Every global store
// an agent makes gets its next stamp (1, 2, …). A view maps agents to stamps: "this agent's
// stores up to that stamp". Each warp has a view of what it is guaranteed to see; a version
// of another block's store is visible to the warp when the warp's view covers its stamp.
//
// A block's plain stores wait in its store buffer (one entry per word) until a release of one
// of its warps commits those the releasing warp's view covers (its own, and its block's warps'
// up to the last barrier they met at), or until a seeded drain, or until the block exits.
// Committing appends a version to the word's history (its coherence order) and writes the
// word's memory, so that memory always holds the latest committed value.
//
// A read picks a version between the latest one visible to the warp and the latest one
// committed (and its block's own buffered bytes over it). A strong write carries a message
// view (the writer's view at its release, or at its last release fence); an acquire joins the
// message views of the versions it read into the reader's view.

// ErrStaleRead is wrapped by the ExecError of a weak-mode load that raced with a write: it
// returned a value older than one another block had already stored there, with no release
// and acquire ordering that store before the load (or a .nc load returned a value the launch
// had overwritten).
var ErrStaleRead = errors.New("stale read")

// Weak configures the weak-memory mode.
type Weak struct {
	// Seed drives every adversarial choice: the order blocks start in, which resident block
	// and which of its warps run next and for how long, when buffered stores drain, and which
	// allowed value a load returns. A launch with the same kernel, arguments, memory, Seed and
	// Config.Workers runs the same way every time (Backend mixes in its launch count, so
	// successive launches differ).
	Seed uint64
	// AllowStale lets a racy load (ErrStaleRead) return the stale value and the launch go on;
	// Stats.StaleReads counts them. Loads then choose among their allowed values at random
	// rather than the oldest, which litmus tests use to see every allowed outcome.
	AllowStale bool
}

// memOrder is the memory-model reading of an ld, st, atom or red instruction.
type memOrder struct {
	sem   memSem
	scope memScope
	nc    bool // ld.global.nc or ldu: the non-coherent path
}

type memSem uint8

const (
	semWeak memSem = iota
	semRelaxed
	semAcquire
	semRelease
	semAcqRel
	semSC // fences only: fence.sc, membar
)

type memScope uint8

const (
	scopeNone memScope = iota
	scopeCTA           // .cta, and .cluster (a launch's clusters are single CTAs here)
	scopeGPU           // .gpu, and .sys (one device)
)

// strong reports whether the operation is strong at a scope that includes other blocks:
// only such operations synchronise, or are morally strong, across blocks.
func (m memOrder) strong() bool    { return m.sem != semWeak && m.scope == scopeGPU }
func (m memOrder) acquires() bool  { return m.strong() && (m.sem == semAcquire || m.sem == semAcqRel) }
func (m memOrder) releases() bool  { return m.strong() && (m.sem == semRelease || m.sem == semAcqRel) }
func (m memOrder) anyStrong() bool { return m.sem != semWeak }

// view is what a warp is guaranteed to see: each agent's stores up to a stamp (ag), and
// each word's versions up to one it observed (obs: the version index + 1) — a write a strong
// load read, which causality orders before whatever follows an acquire. Views are shared
// and never changed in place.
type view struct {
	ag, obs entries
}

// entries maps keys to values (0: none), sorted by key.
type entries []viewEntry

type viewEntry struct {
	key uint64
	val uint32
}

func (v entries) search(k uint64) int {
	lo, hi := 0, len(v)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v[m].key < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (v entries) get(k uint64) uint32 {
	if i := v.search(k); i < len(v) && v[i].key == k {
		return v[i].val
	}
	return 0
}

// with returns v raised to x at k.
func (v entries) with(k uint64, x uint32) entries {
	i := v.search(k)
	if i < len(v) && v[i].key == k {
		if v[i].val >= x {
			return v
		}
		out := append(entries(nil), v...)
		out[i].val = x
		return out
	}
	out := make(entries, 0, len(v)+1)
	out = append(out, v[:i]...)
	out = append(out, viewEntry{k, x})
	return append(out, v[i:]...)
}

// covers reports whether a holds every value of b.
func (a entries) covers(b entries) bool {
	i := 0
	for _, e := range b {
		for i < len(a) && a[i].key < e.key {
			i++
		}
		if i == len(a) || a[i].key != e.key || a[i].val < e.val {
			return false
		}
	}
	return true
}

// joinEntries returns the least entries covering a and b.
func joinEntries(a, b entries) entries {
	switch {
	case a.covers(b):
		return a
	case b.covers(a):
		return b
	}
	out := make(entries, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].key < b[j].key:
			out = append(out, a[i])
			i++
		case a[i].key > b[j].key:
			out = append(out, b[j])
			j++
		default:
			out = append(out, viewEntry{a[i].key, max(a[i].val, b[j].val)})
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// get returns the stamp v holds for agent a (0: none of its stores).
func (v view) get(a uint64) uint32 { return v.ag.get(a) }

// with returns v raised to stamp s for agent a.
func (v view) with(a uint64, s uint32) view { return view{v.ag.with(a, s), v.obs} }

// seen returns the index of the latest version of word wa that v observed (-1: none).
func (v view) seen(wa uint64) int { return int(v.obs.get(wa)) - 1 }

// withSeen returns v having observed version i of word wa.
func (v view) withSeen(wa uint64, i int) view { return view{v.ag, v.obs.with(wa, uint32(i+1))} }

func (v view) empty() bool { return len(v.ag) == 0 && len(v.obs) == 0 }

// join returns the least view covering a and b.
func join(a, b view) view { return view{joinEntries(a.ag, b.ag), joinEntries(a.obs, b.obs)} }

// byteMask expands a 4-bit byte mask to the bits of a little-endian word.
var byteMask = func() (t [16]uint32) {
	for m := range t {
		for i := 0; i < 4; i++ {
			if m&(1<<i) != 0 {
				t[m] |= 0xff << (8 * i)
			}
		}
	}
	return
}()

func merge(dst, src uint32, mask uint8) uint32 {
	bm := byteMask[mask&15]
	return dst&^bm | src&bm
}

// getWord reads a word's bytes (fewer than 4 at an allocation's end).
func getWord(b []byte) uint32 {
	if len(b) >= 4 {
		return binary.LittleEndian.Uint32(b)
	}
	var v uint32
	for i, x := range b {
		v |= uint32(x) << (8 * i)
	}
	return v
}

func putMasked(b []byte, v uint32, mask uint8) {
	for i := range b {
		if mask&(1<<i) != 0 {
			b[i] = byte(v >> (8 * i))
		}
	}
}

// version is one committed write of a word.
type version struct {
	val   uint32
	mask  uint8 // the bytes it wrote
	block int64 // the writer's block (linear index) and agent, the agent's stamp of the store
	agent uint64
	stamp uint32
	pc    int32
	// a strong write (atomics included), and the view it carries (release patterns)
	strong bool
	msg    view
}

// wordState is the history of a 4-byte-aligned word written during the launch.
type wordState struct {
	mem     []byte // the word's bytes in memory: the latest committed value
	init    uint32 // the word when the launch began
	vers    []version
	pending []int32 // resident slots holding a buffered store to the word
}

// at composes the word as of version c (-1: the launch's initial value) for the bytes in rm,
// and joins the message views of the versions that supply them.
func (ws *wordState) at(c int, rm uint8, wantMsg bool) (uint32, view) {
	need := rm
	var v uint32
	var msg view
	for i := c; i >= 0 && need != 0; i-- {
		x := &ws.vers[i]
		if m := x.mask & need; m != 0 {
			v = merge(v, x.val, m)
			need &^= m
			if wantMsg && !x.msg.empty() {
				msg = join(msg, x.msg)
			}
		}
	}
	if need != 0 {
		v = merge(v, ws.init, need)
	}
	return v, msg
}

func (ws *wordState) dropPending(slot int32) {
	for i, s := range ws.pending {
		if s == slot {
			ws.pending[i] = ws.pending[len(ws.pending)-1]
			ws.pending = ws.pending[:len(ws.pending)-1]
			return
		}
	}
}

// bufEntry is a block's buffered store to one word.
type bufEntry struct {
	word  uint64
	ws    *wordState
	val   uint32
	mask  uint8
	warp  int32
	stamp uint32
	pc    int32
}

// weakMem is the weak-memory state of one launch. Its blocks run on one goroutine.
type weakMem struct {
	l      *launch
	cfg    Weak
	rng    *rand.Rand
	nwarps uint64
	// regions holds, per allocation written during the launch (by base address), the state
	// of its written words in pages of 1024 words; gen counts the regions added (warps
	// cache their last lookup)
	regions    map[uint64]*regionShadow
	gen        uint32
	sc         view // the join of every gpu-scope fence.sc so far (their total order is execution order)
	slots      []*blockRun
	staleReads int64
}

// regionShadow is the written words of one allocation: pages[i][j] is word 1024·i + j.
type regionShadow struct {
	pages [][]*wordState
}

const pageWords = 1024

// warpWeak is a warp's weak-memory state.
type warpWeak struct {
	// the warp's last region lookup: shadow (nil: never written) of the region at shBase,
	// valid while the launch's gen is shGen or the shadow exists
	shadow *regionShadow
	shBase uint64
	shGen  uint32
	shOK   bool

	wv       view   // what the warp is guaranteed to see
	pend     view   // what strong loads read since its last acquire fence
	rel      view   // its view at its last release fence (what a later strong write carries)
	relOK    bool   // it has passed a release fence
	stamp    uint32 // its stores so far
	barStamp uint32 // its stamp when it last left a barrier
	coh      map[uint64]int32
}

// blockWeak is a block's weak-memory state.
type blockWeak struct {
	linear  int64
	slot    int32
	buf     []bufEntry
	bidx    map[uint64]int32 // word → index in buf
	ctaView view             // the join of the views of its warps' fences (any scope)
	barView [16]view         // the views the warps arriving at each barrier bring
}

func (b *blockRun) agent(warp int) uint64 { return uint64(b.linear)*b.l.wk.nwarps + uint64(warp) }

// beginWeak resets the block's and its warps' weak-memory state for block linear.
func (b *blockRun) beginWeak(linear int64) {
	b.linear = linear
	b.buf = b.buf[:0]
	if b.bidx == nil {
		b.bidx = map[uint64]int32{}
	}
	clear(b.bidx)
	b.ctaView = view{}
	b.barView = [16]view{}
	for _, w := range b.warps {
		w.warpWeak = warpWeak{}
	}
}

// sees reports whether version v is visible to warp w: its block's own versions always are.
func (w *warp) sees(v *version) bool {
	return v.block == w.b.linear || v.stamp <= w.wv.get(v.agent)
}

// self is w's view raised to its own stores.
func (w *warp) self() view { return w.wv.with(w.b.agent(w.id), w.stamp) }

// regionOf returns the shadow of the warp's current region (w.gc), creating it if create.
func (w *warp) regionOf(create bool) *regionShadow {
	wk, base := w.b.l.wk, w.gc.base
	if w.shOK && w.shBase == base && (w.shadow != nil || !create && w.shGen == wk.gen) {
		return w.shadow
	}
	sh := wk.regions[base]
	if sh == nil && create {
		n := (len(w.gc.data) + 4*pageWords - 1) / (4 * pageWords)
		sh = &regionShadow{pages: make([][]*wordState, n)}
		wk.regions[base] = sh
		wk.gen++
	}
	w.shadow, w.shBase, w.shGen, w.shOK = sh, base, wk.gen, true
	return sh
}

// lookup returns the state of word wa of the warp's current region, nil if it has not
// been written during the launch.
func (w *warp) lookup(wa uint64) *wordState {
	sh := w.regionOf(false)
	if sh == nil {
		return nil
	}
	i := (wa - w.gc.base) >> 2
	if p := sh.pages[i/pageWords]; p != nil {
		return p[i%pageWords]
	}
	return nil
}

// word returns the state of word wa of the warp's current region, creating it.
func (w *warp) word(wa uint64) *wordState {
	sh := w.regionOf(true)
	i := (wa - w.gc.base) >> 2
	p := sh.pages[i/pageWords]
	if p == nil {
		p = make([]*wordState, pageWords)
		sh.pages[i/pageWords] = p
	}
	ws := p[i%pageWords]
	if ws == nil {
		mem := w.wordMem(wa)
		ws = &wordState{mem: mem, init: getWord(mem)}
		p[i%pageWords] = ws
	}
	return ws
}

// commit makes a buffered entry of block b a version of its word.
func (wk *weakMem) commit(b *blockRun, e *bufEntry) {
	ws := e.ws
	ws.vers = append(ws.vers, version{val: e.val, mask: e.mask, block: b.linear, agent: b.agent(int(e.warp)), stamp: e.stamp, pc: e.pc})
	putMasked(ws.mem, e.val, e.mask)
	ws.dropPending(b.slot)
}

// flush commits the entries of b's buffer for which commitIt is true, in buffer order, and
// keeps the others.
func (wk *weakMem) flush(b *blockRun, commitIt func(e *bufEntry) bool) {
	n := 0
	for i := range b.buf {
		e := &b.buf[i]
		if commitIt(e) {
			wk.commit(b, e)
			delete(b.bidx, e.word)
			continue
		}
		b.buf[n] = *e
		b.bidx[e.word] = int32(n)
		n++
	}
	b.buf = b.buf[:n]
}

// flushWord commits b's buffered entry for word wa, if any.
func (wk *weakMem) flushWord(b *blockRun, wa uint64) {
	i, ok := b.bidx[wa]
	if !ok {
		return
	}
	wk.commit(b, &b.buf[i])
	delete(b.bidx, wa)
	last := int32(len(b.buf) - 1)
	if i != last {
		b.buf[i] = b.buf[last]
		b.bidx[b.buf[i].word] = i
	}
	b.buf = b.buf[:last]
}

// release is the release half of a fence or release operation by warp w: its view takes in
// its own stores, and the buffered stores that view covers are committed.
func (w *warp) release() {
	b := w.b
	w.wv = w.self()
	me := int32(w.id)
	b.l.wk.flush(b, func(e *bufEntry) bool {
		return e.warp == me || e.stamp <= w.wv.get(b.agent(int(e.warp)))
	})
}

// fence runs a fence (membar, fence.sc, fence.acq_rel, fence.acquire, fence.release) for warp w.
func (w *warp) fence(sem memSem, scope memScope) {
	b, wk := w.b, w.b.l.wk
	// any fence orders the block's warps among themselves (its fences meet in one order)
	w.wv = join(w.self(), b.ctaView)
	b.ctaView = w.wv
	if scope != scopeGPU {
		return
	}
	sc := sem == semSC
	if sc || sem == semAcquire || sem == semAcqRel {
		w.wv = join(w.wv, w.pend)
		w.pend = view{}
	}
	if sc {
		w.wv = join(w.wv, wk.sc)
	}
	if sc || sem == semRelease || sem == semAcqRel {
		w.release()
		w.rel, w.relOK = w.wv, true
	}
	if sc {
		wk.sc = w.wv
	}
}

// arrive records warp w's arrival at barrier id: the warps the barrier releases will see
// what w sees.
func (w *warp) arriveWeak(id int) {
	b := w.b
	b.barView[id] = join(b.barView[id], w.self())
}

// leaveBarrier gives warp w, released from barrier id, what every warp arriving there saw.
func (w *warp) leaveBarrier(id int) {
	w.wv = join(w.wv, w.b.barView[id])
	w.barStamp = w.stamp
}

// bufferStore buffers warp w's plain store of the bytes mask of val to word wa.
func (wk *weakMem) bufferStore(w *warp, ws *wordState, wa uint64, val uint32, mask uint8) {
	b := w.b
	w.stamp++
	me := int32(w.id)
	if i, ok := b.bidx[wa]; ok {
		e := &b.buf[i]
		if e.warp == me && e.stamp > w.barStamp {
			e.val, e.mask, e.stamp, e.pc = merge(e.val, val, mask), e.mask|mask, w.stamp, w.cur
			return
		}
		// a store of another warp, or one from before a barrier, keeps its own stamp: it
		// drains first
		wk.flushWord(b, wa)
	}
	b.bidx[wa] = int32(len(b.buf))
	b.buf = append(b.buf, bufEntry{word: wa, ws: ws, val: val, mask: mask, warp: me, stamp: w.stamp, pc: w.cur})
	ws.pending = append(ws.pending, b.slot)
}

// commitStrong writes a strong store of warp w to word wa at once, carrying msg.
func (wk *weakMem) commitStrong(w *warp, ws *wordState, val uint32, mask uint8, msg view) {
	b := w.b
	w.stamp++
	ws.vers = append(ws.vers, version{val: val, mask: mask, block: b.linear, agent: b.agent(w.id), stamp: w.stamp, pc: w.cur, strong: true, msg: msg})
	putMasked(ws.mem, val, mask)
}

// strongMsg is the message view a strong write of w carries: its view if the write
// releases, else its view at its last release fence.
func (w *warp) strongMsg(ord memOrder) view {
	switch {
	case !ord.strong():
		return view{}
	case ord.releases():
		return w.wv
	case w.relOK:
		return w.rel
	}
	return view{}
}

// wordsOf calls f for each word of an access of n bytes at addr (naturally aligned): its
// address, the access's bytes in it (mask) and where those start in the access (at).
func wordsOf(addr uint64, n int, f func(wa uint64, mask uint8, at, shift int) bool) bool {
	if n < 4 {
		sh := int(addr & 3)
		return f(addr&^3, uint8(1<<n-1)<<sh, 0, sh)
	}
	for i := 0; i < n; i += 4 {
		if !f(addr+uint64(i), 15, i, 0) {
			return false
		}
	}
	return true
}

// wordMem returns the memory bytes of the word holding addr in the warp's current region.
func (w *warp) wordMem(wa uint64) []byte {
	c := &w.gc
	off := wa - c.base
	end := min(off+4, uint64(len(c.data)))
	return c.data[off:end]
}

// store performs warp w's (lane l's) store of src at addr, a writable global address.
func (wk *weakMem) store(w *warp, l int, addr uint64, src []byte, ord memOrder) bool {
	if w.gc.base&3 != 0 {
		w.fault(l, "weak memory mode: the allocation at %#x is not 4-byte aligned", w.gc.base)
		return false
	}
	if ord.releases() {
		w.release()
	}
	msg := w.strongMsg(ord)
	return wordsOf(addr, len(src), func(wa uint64, mask uint8, at, sh int) bool {
		var v uint32
		if len(src) < 4 {
			v = getWord(src) << (8 * sh)
		} else {
			v = binary.LittleEndian.Uint32(src[at:])
		}
		ws := w.word(wa)
		if ord.strong() {
			wk.flushWord(w.b, wa)
			wk.commitStrong(w, ws, v, mask, msg)
		} else {
			wk.bufferStore(w, ws, wa, v, mask)
		}
		return true
	})
}

// load performs warp w's (lane l's) load of len(dst) bytes at addr, a writable global address
// whose bytes in memory are mem, into dst. It returns false after recording a fault.
func (wk *weakMem) load(w *warp, l int, addr uint64, mem, dst []byte, ord memOrder) bool {
	var msgs view
	ok := wordsOf(addr, len(dst), func(wa uint64, rm uint8, at, sh int) bool {
		ws := w.lookup(wa)
		var v uint32
		if ws == nil { // not written during this launch
			if len(dst) < 4 {
				copy(dst, mem)
				return true
			}
			v = binary.LittleEndian.Uint32(mem[at:])
		} else {
			var msg view
			var ok bool
			if v, msg, ok = wk.loadWord(w, l, ws, wa, rm, ord); !ok {
				return false
			}
			msgs = join(msgs, msg)
		}
		if len(dst) < 4 {
			for i := range dst {
				dst[i] = byte(v >> (8 * (sh + i)))
			}
		} else {
			binary.LittleEndian.PutUint32(dst[at:], v)
		}
		return true
	})
	if ord.acquires() {
		w.wv = join(w.wv, msgs)
	} else if ord.strong() {
		w.pend = join(w.pend, msgs)
	}
	return ok
}

// loadWord chooses the value a load of the bytes rm of word wa returns to warp w.
func (wk *weakMem) loadWord(w *warp, l int, ws *wordState, wa uint64, rm uint8, ord memOrder) (uint32, view, bool) {
	b := w.b
	if wk.cfg.AllowStale && len(ws.pending) > 0 {
		// another block's buffered store to the word may drain just before this load
		for i := 0; i < len(ws.pending); i++ {
			if s := ws.pending[i]; s != b.slot && wk.rng.IntN(2) == 0 {
				wk.flushWord(wk.slots[s], wa)
				i--
			}
		}
	}
	hi := len(ws.vers) - 1
	c := -1
	if ord.nc {
		// the non-coherent path may return any value the word held during the launch
		if wk.cfg.AllowStale {
			c = wk.rng.IntN(hi+2) - 1
		}
	} else {
		lo := -1
		for i := hi; i >= 0; i-- {
			if w.sees(&ws.vers[i]) {
				lo = i
				break
			}
		}
		if x, ok := w.coh[wa]; ok && int(x) > lo {
			lo = int(x)
		}
		if x := w.wv.seen(wa); x > lo {
			lo = x
		}
		c = lo
		if lo < hi {
			switch {
			case ord.strong():
				// a strong load sees the latest write at least half the time (polls progress)
				if wk.rng.IntN(2) == 0 {
					c = hi
				} else {
					c = lo + wk.rng.IntN(hi-lo+1)
				}
			case wk.cfg.AllowStale:
				c = lo + wk.rng.IntN(hi-lo+1)
			}
			if c > lo {
				if w.coh == nil {
					w.coh = map[uint64]int32{}
				}
				w.coh[wa] = int32(c)
			}
		}
	}
	v, msg := ws.at(c, rm, ord.strong())
	if ord.strong() && c >= 0 && ws.vers[c].strong {
		msg = msg.withSeen(wa, c) // what follows an acquire sees at least this write
	}
	var own *bufEntry
	if len(ws.pending) > 0 {
		if i, ok := b.bidx[wa]; ok {
			own = &b.buf[i]
			if !ord.nc {
				v = merge(v, own.val, own.mask&rm)
			}
		}
	}
	if ord.strong() {
		return v, msg, true
	}
	// a plain or non-coherent load racing with a write it does not see
	latest := getWord(ws.mem)
	if own != nil {
		latest = merge(latest, own.val, own.mask)
	}
	if d := (v ^ latest) & byteMask[rm]; d != 0 {
		by := "this block"
		for i := hi; i > c; i-- {
			if x := &ws.vers[i]; x.mask&rm != 0 && (v^x.val)&byteMask[x.mask&rm] != 0 {
				by = wk.writer(x.block, x.agent, x.pc)
				break
			}
		}
		return v, msg, wk.stale(w, l, wa, v, latest, rm, by, ord)
	}
	for _, s := range ws.pending {
		if s == b.slot {
			continue
		}
		o := wk.slots[s]
		e := &o.buf[o.bidx[wa]]
		if m := e.mask & rm; m != 0 && (v^e.val)&byteMask[m] != 0 {
			by := wk.writer(o.linear, o.agent(int(e.warp)), e.pc) + " (still in its store buffer)"
			return v, msg, wk.stale(w, l, wa, v, merge(v, e.val, m), rm, by, ord)
		}
	}
	return v, msg, true
}

// writer describes the store of agent a of block linear at pc.
func (wk *weakMem) writer(linear int64, a uint64, pc int32) string {
	g := wk.l.g.Grid
	in := &wk.l.k.prog[pc]
	return fmt.Sprintf("block (%d,%d,%d) warp %d at line %d `%s`", linear%int64(g.X), linear/int64(g.X)%int64(g.Y),
		linear/(int64(g.X)*int64(g.Y)), a%wk.nwarps, in.line, in.text)
}

// stale reports a racy load; it returns false after recording the fault.
func (wk *weakMem) stale(w *warp, l int, wa uint64, got, newer uint32, rm uint8, by string, ord memOrder) bool {
	if wk.cfg.AllowStale {
		wk.staleReads++
		return true
	}
	bm := byteMask[rm]
	why := "nothing orders that store before this load (a missing fence, release or acquire)"
	if ord.nc {
		why = "a non-coherent load may return data overwritten during the launch"
	}
	w.faultErr(l, ErrStaleRead, "stale read of the word at %#x: the load returned %#08x, but %s stored %#08x there, and %s",
		wa, got&bm, by, newer&bm, why)
	return false
}

// atomic performs warp w's (lane l's) read-modify-write of the n bytes at addr (writable
// global memory mem) with f, on the latest committed value; it returns the old value.
func (wk *weakMem) atomic(w *warp, addr uint64, mem []byte, ord memOrder, red bool, f func(old uint64) uint64) uint64 {
	b := w.b
	var prev view
	wordsOf(addr, len(mem), func(wa uint64, _ uint8, _, _ int) bool {
		wk.flushWord(b, wa)
		if ws := w.lookup(wa); ws != nil && len(ws.vers) > 0 && ord.strong() {
			last := len(ws.vers) - 1
			if x := &ws.vers[last]; x.strong {
				prev = join(prev, x.msg.withSeen(wa, last))
			}
		}
		return true
	})
	old := loadBits(mem)
	nv := f(old)
	var tmp [8]byte
	src := tmp[:len(mem)]
	storeBits(src, nv)
	var msg view
	if ord.strong() {
		msg = join(w.strongMsg(ord), prev) // an atomic continues the release sequence it reads
	}
	wordsOf(addr, len(mem), func(wa uint64, mask uint8, at, _ int) bool {
		wk.commitStrong(w, w.word(wa), binary.LittleEndian.Uint32(src[at:]), mask, msg)
		return true
	})
	if !red { // a reduction's read forms no acquire pattern
		if ord.acquires() {
			w.wv = join(w.wv, prev)
		} else if ord.strong() {
			w.pend = join(w.pend, prev)
		}
	}
	return old
}

// drain commits a seeded random half of block b's buffered stores, in buffer order.
func (wk *weakMem) drain(b *blockRun) {
	wk.flush(b, func(*bufEntry) bool { return wk.rng.IntN(2) == 0 })
}
