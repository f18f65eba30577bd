package ptxvm

import (
	"math/bits"
)

// Warp-level and block-level synchronisation: shfl.sync (up, down, bfly, idx with the
// clamp/segment operand c), vote.sync (all, any, uni, ballot), redux.sync, match.sync, activemask,
// bar.warp.sync, bar.sync / barrier.sync (optionally with a thread count), bar.arrive, and the
// memory fences (membar, fence), which need nothing in the default mode (warps of a block
// interleave only at well-defined points and every access is immediately visible) and order
// memory in the weak-memory mode.

func init() {
	register(shfl, "shfl")
	register(vote, "vote")
	register(redux, "redux")
	register(match, "match")
	register(activemask, "activemask")
	register(bar, "bar", "barrier")
	register(fence, "membar", "fence")
}

// member compiles a membermask operand (an immediate or a register).
func (o *opcode) member(i int) (int32, error) { return o.src(i, kB32) }

func shfl(o *opcode, ins *inst) error {
	sync := o.has("sync")
	mode := o.oneOf("up", "down", "bfly", "idx")
	if mode == "" {
		return o.c.errf("shfl needs .up, .down, .bfly or .idx")
	}
	if k, err := o.typ(); err != nil {
		return err
	} else if k != kB32 {
		return o.c.errf("shfl.%v is not supported (only .b32)", k)
	}
	n := 4
	if sync {
		n = 5
	}
	if err := o.nargs(n); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	var p int32 = -1
	if pipe := o.args[0].pipe; pipe != "" {
		r, ok := o.c.lookupReg(pipe)
		if !ok || r.typ != kPred {
			return o.c.errf("%s is not a predicate register", pipe)
		}
		p = r.slot
	}
	s, err := o.srcs(1, 3, kB32)
	if err != nil {
		return err
	}
	if sync {
		if ins.member, err = o.member(4); err != nil {
			return err
		}
	} else {
		ins.member = o.c.constant(0xffffffff)
	}
	ins.ctl = ctlWarpReq
	ins.fn = func(w *warp, m uint32) {
		A, B, C := w.s(s[0]), w.s(s[1]), w.s(s[2])
		var val [32]uint64
		var ok uint32
		for mm := m; mm != 0; mm &= mm - 1 {
			lane := uint64(bits.TrailingZeros32(mm))
			b, c := B[lane]&31, C[lane]
			cval, seg := c&31, (c>>8)&31
			maxLane := lane&seg | cval&^seg
			minLane := lane & seg
			var j uint64
			var pval bool
			switch mode {
			case "up":
				j = lane - b
				pval = int64(j) >= int64(maxLane)
			case "down":
				j = lane + b
				pval = j <= maxLane
			case "bfly":
				j = lane ^ b
				pval = j <= maxLane
			case "idx":
				j = minLane | b&^seg
				pval = j <= maxLane
			}
			if !pval {
				j = lane
			}
			if m&(1<<j) == 0 {
				w.fault(int(lane), "shfl.%s reads lane %d, which is not executing this shfl", mode, j)
				return
			}
			val[lane] = A[j] & 0xffffffff
			if pval {
				ok |= 1 << lane
			}
		}
		D := w.s(d)
		for mm := m; mm != 0; mm &= mm - 1 {
			l := bits.TrailingZeros32(mm)
			D[l] = val[l]
			if p >= 0 {
				w.s(p)[l] = uint64(ok>>l) & 1
			}
		}
	}
	return nil
}

func vote(o *opcode, ins *inst) error {
	sync := o.has("sync")
	mode := o.oneOf("all", "any", "uni", "ballot")
	if mode == "" {
		return o.c.errf("vote needs .all, .any, .uni or .ballot")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if (mode == "ballot") != (k == kB32) || k != kB32 && k != kPred {
		return o.c.errf("vote.%s.%v is not a valid form", mode, k)
	}
	n := 2
	if sync {
		n = 3
	}
	if err := o.nargs(n); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	a, neg, err := o.pred(1)
	if err != nil {
		return err
	}
	if sync {
		if ins.member, err = o.member(2); err != nil {
			return err
		}
	} else {
		ins.member = o.c.constant(0xffffffff)
	}
	ins.ctl = ctlWarpReq
	ins.fn = func(w *warp, m uint32) {
		A := w.s(a)
		var set uint32
		for mm := m; mm != 0; mm &= mm - 1 {
			l := bits.TrailingZeros32(mm)
			if (A[l]&1 != 0) != neg {
				set |= 1 << l
			}
		}
		var r uint64
		switch mode {
		case "all":
			if set == m {
				r = 1
			}
		case "any":
			if set != 0 {
				r = 1
			}
		case "uni":
			if set == 0 || set == m {
				r = 1
			}
		case "ballot":
			r = uint64(set)
		}
		D := w.s(d)
		for mm := m; mm != 0; mm &= mm - 1 {
			D[bits.TrailingZeros32(mm)] = r
		}
	}
	return nil
}

// redux.sync.op.type d, a, membermask: add/min/max over .u32/.s32, and/or/xor over .b32.
func redux(o *opcode, ins *inst) error {
	if !o.has("sync") {
		return o.c.errf("redux needs .sync")
	}
	op := o.oneOf("add", "min", "max", "and", "or", "xor")
	if op == "" {
		return o.c.errf("redux needs an operation")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if err := o.nargs(3); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	a, err := o.src(1, k)
	if err != nil {
		return err
	}
	if ins.member, err = o.member(2); err != nil {
		return err
	}
	ins.ctl = ctlWarpReq
	ins.fn = func(w *warp, m uint32) {
		A := w.s(a)
		first := true
		var acc uint64
		for mm := m; mm != 0; mm &= mm - 1 {
			v := A[bits.TrailingZeros32(mm)] & 0xffffffff
			if first {
				acc, first = v, false
				continue
			}
			switch op {
			case "add":
				acc = (acc + v) & 0xffffffff
			case "and":
				acc &= v
			case "or":
				acc |= v
			case "xor":
				acc ^= v
			case "min", "max":
				less := acc < v
				if k.signed() {
					less = int32(acc) < int32(v)
				}
				if less != (op == "min") {
					acc = v
				}
			}
		}
		D := w.s(d)
		for mm := m; mm != 0; mm &= mm - 1 {
			D[bits.TrailingZeros32(mm)] = acc
		}
	}
	return nil
}

func activemask(o *opcode, ins *inst) error {
	if _, err := o.typ(); err != nil {
		return err
	}
	if err := o.nargs(1); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	ins.fn = func(w *warp, m uint32) {
		D := w.s(d)
		for mm := m; mm != 0; mm &= mm - 1 {
			D[bits.TrailingZeros32(mm)] = uint64(m)
		}
	}
	return nil
}

// bar/barrier: bar.sync a{, b}, bar.arrive a, b, barrier.sync{.aligned} a{, b},
// bar.warp.sync membermask.
func bar(o *opcode, ins *inst) error {
	o.ignore("cta", "aligned")
	if o.has("warp") {
		if !o.has("sync") {
			return o.c.errf("bar.warp needs .sync")
		}
		if err := o.nargs(1); err != nil {
			return err
		}
		var err error
		if ins.member, err = o.member(0); err != nil {
			return err
		}
		ins.ctl = ctlWarpReq
		ins.fn = func(*warp, uint32) {}
		return nil
	}
	switch o.oneOf("sync", "arrive", "red") {
	case "sync":
		ins.ctl = ctlBar
	case "arrive":
		ins.ctl = ctlArrive
	case "red":
		return o.c.errf("bar.red is not supported")
	default:
		if o.name == "bar" && len(o.mods) == 0 {
			ins.ctl = ctlBar // plain "bar a" is bar.sync
		} else {
			return o.c.errf("%s needs .sync or .arrive", o.name)
		}
	}
	if err := o.nargs(1, 2); err != nil {
		return err
	}
	if ins.ctl == ctlArrive && len(o.args) != 2 {
		return o.c.errf("bar.arrive needs a thread count")
	}
	var err error
	if ins.barID, err = o.src(0, kU32); err != nil {
		return err
	}
	if len(o.args) == 2 {
		if ins.barCount, err = o.src(1, kU32); err != nil {
			return err
		}
	}
	return nil
}

// match.sync.any.b32/b64 d, a, membermask: the lanes holding the same value as this one;
// match.sync.all d[|p], a, membermask: all executing lanes if they all hold one value, else 0.
func match(o *opcode, ins *inst) error {
	if !o.has("sync") {
		return o.c.errf("match needs .sync")
	}
	mode := o.oneOf("any", "all")
	if mode == "" {
		return o.c.errf("match needs .any or .all")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k != kB32 && k != kB64 {
		return o.c.errf("match.%v is not supported", k)
	}
	if err := o.nargs(3); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	var p int32 = -1
	if pipe := o.args[0].pipe; pipe != "" {
		r, ok := o.c.lookupReg(pipe)
		if !ok || r.typ != kPred {
			return o.c.errf("%s is not a predicate register", pipe)
		}
		p = r.slot
	}
	a, err := o.src(1, k)
	if err != nil {
		return err
	}
	if ins.member, err = o.member(2); err != nil {
		return err
	}
	mask := k.mask()
	ins.ctl = ctlWarpReq
	ins.fn = func(w *warp, m uint32) {
		A := w.s(a)
		var same [32]uint32
		for mm := m; mm != 0; mm &= mm - 1 {
			l := bits.TrailingZeros32(mm)
			for nn := m; nn != 0; nn &= nn - 1 {
				j := bits.TrailingZeros32(nn)
				if A[j]&mask == A[l]&mask {
					same[l] |= 1 << j
				}
			}
		}
		D := w.s(d)
		for mm := m; mm != 0; mm &= mm - 1 {
			l := bits.TrailingZeros32(mm)
			r := same[l]
			all := same[l] == m
			if mode == "all" && !all {
				r = 0
			}
			D[l] = uint64(r)
			if p >= 0 {
				w.s(p)[l] = 0
				if all {
					w.s(p)[l] = 1
				}
			}
		}
	}
	return nil
}

// membar.{cta,gl,sys} (fence.sc at scope cta, gpu, sys) and fence{.sc,.acq_rel,.acquire,
// .release}.{cta,cluster,gpu,sys} (.acq_rel by default). Proxy fences (membar.proxy,
// fence.proxy.*) and fence.mbarrier_init order nothing this interpreter distinguishes.
func fence(o *opcode, ins *inst) error {
	if o.has("proxy") || o.has("mbarrier_init") || o.has("op_restrict") {
		return nop(o, ins)
	}
	if err := o.nargs(0); err != nil {
		return err
	}
	sem := semAcqRel
	var scope memScope
	if o.name == "membar" {
		sem = semSC
		switch o.oneOf("cta", "gl", "sys") {
		case "cta":
			scope = scopeCTA
		case "gl", "sys":
			scope = scopeGPU
		default:
			return o.c.errf("membar needs .cta, .gl or .sys")
		}
	} else {
		switch o.oneOf("sc", "acq_rel", "acquire", "release") {
		case "sc":
			sem = semSC
		case "acquire":
			sem = semAcquire
		case "release":
			sem = semRelease
		}
		switch o.oneOf("cta", "cluster", "gpu", "sys") {
		case "cta", "cluster":
			scope = scopeCTA
		case "gpu", "sys":
			scope = scopeGPU
		default:
			return o.c.errf("fence needs a scope (.cta, .cluster, .gpu or .sys)")
		}
	}
	ins.fn = func(w *warp, m uint32) {
		if wk := w.b.l.wk; wk != nil {
			w.fence(sem, scope)
			wk.maybeYield(w)
		}
	}
	return nil
}
