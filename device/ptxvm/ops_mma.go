package ptxvm

// Warp-level matrix multiply-accumulate: mma.sync.aligned.m8n8k16.row.col.s32.{s8,u8}.{s8,u8}.s32
// (optionally .satfinite), the integer tensor-core product D = A·B + C of an 8×16 A (row
// major), a 16×8 B (column major) and 8×8 C and D, each spread over the warp's 32 lanes as the
// PTX ISA's fragment layout for m8n8k16 has it. With g = lane/4 (the group) and t = lane mod 4
// (the thread in the group):
//
//	A: one .b32 a lane, byte i = A[g][4t+i]
//	B: one .b32 a lane, byte i = B[4t+i][g]
//	C, D: two .s32 a lane, element i = C[g][2t+i] (D likewise)
//
// The products are exact and summed in 32-bit integers: without .satfinite the sum wraps as
// two's complement addition does (the order of the terms then changes nothing); with it each
// element saturates to the int32 range, computed from the exact 64-bit sum. Every lane of the
// warp must execute it (.aligned): a warp with lanes missing faults.

func init() {
	register(mma, "mma")
}

func mma(o *opcode, ins *inst) error {
	if !o.has("sync") || !o.has("aligned") {
		return o.c.errf("mma needs .sync.aligned")
	}
	if !o.has("m8n8k16") {
		return o.c.errf("mma: only the integer shape .m8n8k16 is supported")
	}
	if !o.has("row") || !o.has("col") {
		return o.c.errf("mma.m8n8k16 needs .row.col")
	}
	sat := o.has("satfinite")
	ts := o.types()
	if len(ts) != 4 || ts[0] != kS32 || ts[3] != kS32 || !int8Kind(ts[1]) || !int8Kind(ts[2]) {
		return o.c.errf("mma.m8n8k16 needs the types .s32.{s8,u8}.{s8,u8}.s32")
	}
	aSigned, bSigned := ts[1] == kS8, ts[2] == kS8
	if err := o.nargs(4); err != nil {
		return err
	}
	// the operands {d0, d1}, {a}, {b}, {c0, c1}: the destination first, registers each
	var ops [4][]int32
	for i, want := range [4]int{2, 1, 1, 2} {
		v, err := o.vec(i, kB32, i == 0)
		if err != nil {
			return err
		}
		if len(v) != want {
			return o.c.errf("mma.m8n8k16 takes {d0, d1}, {a}, {b}, {c0, c1}: operand %d has %d registers", i+1, len(v))
		}
		ops[i] = v
	}
	d, a, b, c := ops[0], ops[1], ops[2], ops[3]
	ins.member = o.c.constant(0xffffffff)
	ins.ctl = ctlWarpReq
	ins.fn = func(w *warp, m uint32) {
		if m != 0xffffffff {
			w.fault(0, "mma.sync.aligned needs every lane of the warp (lanes %#08x execute it)", m)
			return
		}
		A, B := w.s(a[0]), w.s(b[0])
		var out [32][2]uint64
		for l := 0; l < 32; l++ {
			g, t := l/4, l%4
			for i := 0; i < 2; i++ {
				col := 2*t + i
				sum := int64(int32(uint32(w.s(c[i])[l])))
				for k := 0; k < 16; k++ {
					// A[g][k] is byte k mod 4 of lane 4g + k/4; B[k][col] byte k mod 4 of lane 4col + k/4
					x := int8Elem(A[4*g+k/4], k%4, aSigned)
					y := int8Elem(B[4*col+k/4], k%4, bSigned)
					sum += x * y
				}
				out[l][i] = uint64(uint32(mmaClamp(sum, sat)))
			}
		}
		for i := 0; i < 2; i++ {
			D := w.s(d[i])
			for l := 0; l < 32; l++ {
				D[l] = out[l][i]
			}
		}
	}
	return nil
}

func int8Kind(k kind) bool { return k == kS8 || k == kU8 }

// int8Elem is byte i of register value v as a signed or unsigned 8-bit integer.
func int8Elem(v uint64, i int, signed bool) int64 {
	b := uint8(v >> (8 * i))
	if signed {
		return int64(int8(b))
	}
	return int64(b)
}

// mmaClamp is an int32 element of D from its exact sum: wrapped, or with satfinite saturated.
func mmaClamp(sum int64, sat bool) int32 {
	if sat {
		return int32(max(min(sum, 1<<31-1), -1<<31))
	}
	return int32(sum)
}
