package ptxvm

import (
	"math/bits"
	"runtime"
)

// Control flow: bra (.uni), ret and exit (both end the thread: device functions are not
// supported, so ret only appears in entries), trap and brkpt (a fault), nanosleep (yields the
// block's goroutine, or in the weak-memory mode ends the block's turn: a block polling for
// another's progress lets it run).

func init() {
	register(bra, "bra")
	register(exit, "ret", "exit")
	register(trap, "trap", "brkpt")
	register(nanosleep, "nanosleep")
	register(call, "call")
}

func bra(o *opcode, ins *inst) error {
	o.ignore("uni")
	if err := o.nargs(1); err != nil {
		return err
	}
	a := o.args[0]
	if a.kind != oSym {
		return o.c.errf("branch target %v must be a label (indirect branches are not supported)", a)
	}
	t, ok := o.c.labels[a.name]
	if !ok {
		return o.c.errf("unknown label %s", a.name)
	}
	ins.ctl, ins.target = ctlBra, t
	return nil
}

func exit(o *opcode, ins *inst) error {
	o.ignore("uni")
	if err := o.nargs(0); err != nil {
		return err
	}
	ins.ctl = ctlExit
	return nil
}

func trap(o *opcode, ins *inst) error {
	name := o.name
	ins.fn = func(w *warp, m uint32) { w.fault(bits.TrailingZeros32(m), "%s executed", name) }
	return nil
}

func call(o *opcode, ins *inst) error {
	o.ignore("uni")
	name := ""
	for _, a := range o.args {
		if a.kind == oSym {
			name = a.name
			break
		}
	}
	return o.c.errf("call %s: calls are not supported (device functions must be inlined)", name)
}

// nanosleep t: the duration is not kept; the goroutine yields (weak mode: the block's turn ends).
func nanosleep(o *opcode, ins *inst) error {
	o.ignore("u32")
	if err := o.nargs(1); err != nil {
		return err
	}
	if _, err := o.src(0, kU32); err != nil {
		return err
	}
	ins.fn = func(w *warp, _ uint32) {
		if w.b.l.wk != nil {
			w.b.halt = true
			return
		}
		runtime.Gosched()
	}
	return nil
}
