package ptxvm

import (
	"fmt"
	"sort"
)

// Memory is global memory as kernels see it. Region must be safe for concurrent use: blocks
// run on several goroutines.
type Memory interface {
	// Region returns the allocation holding address p: its first address, its bytes, and
	// whether kernels may write to it. ok is false when no allocation holds p.
	Region(p uint64) (base uint64, data []byte, writable, ok bool)
}

// Regions is a Memory made of byte slices at given addresses; the zero value is empty.
// Add every region before the first launch.
type Regions struct {
	list []memRegion // sorted by base
}

type memRegion struct {
	base     uint64
	data     []byte
	writable bool
}

// Add places data at address base. Regions must not overlap.
func (r *Regions) Add(base uint64, data []byte, writable bool) error {
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].base > base })
	if i > 0 {
		if p := r.list[i-1]; p.base+uint64(len(p.data)) > base {
			return fmt.Errorf("ptxvm: region at %#x overlaps the region at %#x", base, p.base)
		}
	}
	if i < len(r.list) && base+uint64(len(data)) > r.list[i].base {
		return fmt.Errorf("ptxvm: region at %#x overlaps the region at %#x", base, r.list[i].base)
	}
	r.list = append(r.list, memRegion{})
	copy(r.list[i+1:], r.list[i:])
	r.list[i] = memRegion{base, data, writable}
	return nil
}

// Remove drops the region starting at base.
func (r *Regions) Remove(base uint64) bool {
	for i, x := range r.list {
		if x.base == base {
			r.list = append(r.list[:i], r.list[i+1:]...)
			return true
		}
	}
	return false
}

func (r *Regions) Region(p uint64) (uint64, []byte, bool, bool) {
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].base > p }) - 1
	if i < 0 {
		return 0, nil, false, false
	}
	x := r.list[i]
	if p-x.base >= uint64(len(x.data)) && !(p == x.base && len(x.data) == 0) {
		return 0, nil, false, false
	}
	return x.base, x.data, x.writable, true
}

// nearest describes the allocation just below p, for out-of-bounds messages.
func (r *Regions) nearest(p uint64) string {
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].base > p }) - 1
	if i < 0 {
		return ""
	}
	x := r.list[i]
	return fmt.Sprintf(" (%d bytes past the end of the %d-byte allocation at %#x)", p-x.base-uint64(len(x.data)), len(x.data), x.base)
}

// State spaces of ld/st/atom.
type space uint8

const (
	spGeneric space = iota
	spGlobal
	spShared
	spLocal
	spParam
	spConst
)

var spaceNames = [...]string{"generic", "global", "shared", "local", "param", "const"}

func (s space) String() string { return spaceNames[s] }

// cachedRegion is a warp's last global region, which most accesses hit.
type cachedRegion struct {
	base     uint64
	data     []byte
	writable bool
}

// access returns the n bytes at address a of space sp for lane l, or nil after recording a
// fault. Accesses must be naturally aligned (to n) and lie inside one allocation.
func (w *warp) access(sp space, a uint64, n int, write bool, l int) []byte {
	if a&uint64(n-1) != 0 {
		w.fault(l, "misaligned %s %s of %d bytes at %#x", sp, rwName(write), n, a)
		return nil
	}
	switch sp {
	case spGeneric:
		switch {
		case a-sharedBase < windowSize:
			w.b.stats.GenericShared++
			return w.shared(a-sharedBase, n, write, l, true)
		case a-localBase < windowSize:
			return w.localMem(a-localBase, n, l, true)
		}
		return w.global(a, n, write, l)
	case spGlobal:
		return w.global(a, n, write, l)
	case spShared:
		return w.shared(a, n, write, l, false)
	case spLocal:
		return w.localMem(a, n, l, false)
	case spParam:
		p := w.b.l.params
		if write {
			w.fault(l, "store to kernel parameter space")
			return nil
		}
		if a+uint64(n) > uint64(len(p)) || a >= uint64(len(p)) {
			w.fault(l, "param load of %d bytes at offset %d: the kernel has %d bytes of parameters", n, a, len(p))
			return nil
		}
		return p[a : a+uint64(n)]
	case spConst:
		c := w.b.l.k.mod.consts
		off := a - constBase
		if write || off >= uint64(len(c)) || off+uint64(n) > uint64(len(c)) {
			w.fault(l, "const %s of %d bytes at %#x: outside the module's %d bytes of .const data", rwName(write), n, a, len(c))
			return nil
		}
		return c[off : off+uint64(n)]
	}
	return nil
}

func rwName(write bool) string {
	if write {
		return "store"
	}
	return "load"
}

func (w *warp) global(a uint64, n int, write bool, l int) []byte {
	c := &w.gc
	if off := a - c.base; off < uint64(len(c.data)) && off+uint64(n) <= uint64(len(c.data)) && (c.writable || !write) {
		return c.data[off : off+uint64(n)]
	}
	var (
		base     uint64
		data     []byte
		writable bool
		ok       bool
	)
	switch {
	case a-dataBase < windowSize:
		base, data, writable, ok = dataBase, w.b.l.k.mod.data, true, a-dataBase < uint64(len(w.b.l.k.mod.data))
	case a-constBase < windowSize:
		base, data, writable, ok = constBase, w.b.l.k.mod.consts, false, a-constBase < uint64(len(w.b.l.k.mod.consts))
	default:
		base, data, writable, ok = w.b.l.mem.Region(a)
	}
	if !ok {
		hint := ""
		if r, isR := w.b.l.mem.(interface{ nearest(uint64) string }); isR {
			hint = r.nearest(a)
		}
		w.fault(l, "global %s of %d bytes at %#x: outside every allocation%s", rwName(write), n, a, hint)
		return nil
	}
	off := a - base
	if off+uint64(n) > uint64(len(data)) {
		w.fault(l, "global %s of %d bytes at %#x runs past the end of the %d-byte allocation at %#x", rwName(write), n, a, len(data), base)
		return nil
	}
	if write && !writable {
		w.fault(l, "global store of %d bytes at %#x: the allocation at %#x is read-only", n, a, base)
		return nil
	}
	*c = cachedRegion{base, data, writable}
	return data[off : off+uint64(n)]
}

func (w *warp) localMem(a uint64, n int, l int, generic bool) []byte {
	size := uint64(w.b.l.k.localBytes)
	if a >= size || a+uint64(n) > size {
		what := ""
		if generic {
			what = " (generic address)"
		}
		w.fault(l, "local access of %d bytes at offset %d%s: the thread has %d bytes of local memory", n, a, what, size)
		return nil
	}
	base := uint64(l) * size
	return w.local[base+a : base+a+uint64(n)]
}

// shared returns shared memory bytes, checking bounds and, unless disabled, races: two
// different warps touching the same byte between two barriers, at least one of them writing.
func (w *warp) shared(a uint64, n int, write bool, l int, generic bool) []byte {
	b := w.b
	if a >= uint64(len(b.shared)) || a+uint64(n) > uint64(len(b.shared)) {
		what := ""
		if generic {
			what = " (generic address)"
		}
		w.fault(l, "shared %s of %d bytes at offset %d%s: the block has %d bytes of shared memory", rwName(write), n, a, what, len(b.shared))
		return nil
	}
	if b.race != nil && !w.atomic {
		me := int32(w.id)
		for i := a; i < a+uint64(n); i++ {
			s := &b.race[i]
			if s.wEpoch == b.epoch && s.wWarp != me {
				w.fault(l, "shared memory race at offset %d: %s by warp %d after a store by warp %d with no barrier between", i, rwName(write), me, s.wWarp)
				return nil
			}
			if write {
				if s.rEpoch == b.epoch && s.rWarp != me {
					other := fmt.Sprintf("warp %d", s.rWarp)
					if s.rWarp < 0 {
						other = "several warps"
					}
					w.fault(l, "shared memory race at offset %d: store by warp %d after a load by %s with no barrier between", i, me, other)
					return nil
				}
				s.wEpoch, s.wWarp = b.epoch, me
			} else if s.rEpoch != b.epoch {
				s.rEpoch, s.rWarp = b.epoch, me
			} else if s.rWarp != me {
				s.rWarp = -1
			}
		}
	}
	return b.shared[a : a+uint64(n)]
}

// shadow is the race-detection record of one shared byte: the last epoch (barrier interval)
// and warp that wrote it and that read it (-1: several warps).
type shadow struct {
	wEpoch, rEpoch uint32
	wWarp, rWarp   int32
}
