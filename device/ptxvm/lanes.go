package ptxvm

import "math/bits"

// builder compiles one instruction family: it reads the opcode's modifiers and operands and
// fills in ins (its exec closure, or its control kind).
type builder func(o *opcode, ins *inst) error

var builders = map[string]builder{}

// register adds a builder for the given opcode names (the part before the first dot).
func register(b builder, names ...string) {
	for _, n := range names {
		if _, dup := builders[n]; dup {
			panic("ptxvm: instruction " + n + " registered twice")
		}
		builders[n] = b
	}
}

// Per-lane helpers: run f for every lane in m. Destination and sources may be the same
// register: each lane reads its sources before writing.

func lanes1(d, a int32, f func(a uint64) uint64) execFn {
	return func(w *warp, m uint32) {
		D, A := w.s(d), w.s(a)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = f(A[l])
		}
	}
}

func lanes2(d, a, b int32, f func(a, b uint64) uint64) execFn {
	return func(w *warp, m uint32) {
		D, A, B := w.s(d), w.s(a), w.s(b)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = f(A[l], B[l])
		}
	}
}

func lanes3(d, a, b, c int32, f func(a, b, c uint64) uint64) execFn {
	return func(w *warp, m uint32) {
		D, A, B, C := w.s(d), w.s(a), w.s(b), w.s(c)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = f(A[l], B[l], C[l])
		}
	}
}

func lanes4(d, a, b, c, e int32, f func(a, b, c, e uint64) uint64) execFn {
	return func(w *warp, m uint32) {
		D, A, B, C, E := w.s(d), w.s(a), w.s(b), w.s(c), w.s(e)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = f(A[l], B[l], C[l], E[l])
		}
	}
}

// srcs compiles operands from..from+n-1 as sources of type k.
func (o *opcode) srcs(from, n int, k kind) ([]int32, error) {
	out := make([]int32, n)
	for i := range out {
		s, err := o.src(from+i, k)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// simple compiles "op d, a[, b[, c]]" with n sources of type k and a per-lane function
// taking and returning register bits.
func (o *opcode) simple(ins *inst, k kind, n int, f any) error {
	if err := o.nargs(n + 1); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, n, k)
	if err != nil {
		return err
	}
	switch n {
	case 1:
		ins.fn = lanes1(d, s[0], f.(func(uint64) uint64))
	case 2:
		ins.fn = lanes2(d, s[0], s[1], f.(func(uint64, uint64) uint64))
	case 3:
		ins.fn = lanes3(d, s[0], s[1], s[2], f.(func(uint64, uint64, uint64) uint64))
	case 4:
		ins.fn = lanes4(d, s[0], s[1], s[2], s[3], f.(func(uint64, uint64, uint64, uint64) uint64))
	}
	return nil
}
