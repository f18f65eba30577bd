package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/host/quant"
)

// legacyLayout gives, per legacy type, the byte offsets of its fields in a block (−1: absent).
var legacyLayout = map[dtype.Type]struct{ m, qh, qs int }{
	dtype.Q4_0: {-1, -1, 2},
	dtype.Q4_1: {2, -1, 4},
	dtype.Q5_0: {-1, 2, 6},
	dtype.Q5_1: {2, 4, 8},
	dtype.Q8_0: {-1, -1, 2},
}

var legacyTypes = []dtype.Type{dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.Q8_0}

// legacyBlock encodes one weight block from fp16 scale bits d, m (m unused by the symmetric
// types) and raw quants q (0…15 for q4, 0…31 for q5, −128…127 for q8_0).
func legacyBlock(t dtype.Type, d, m uint16, q [32]int) []byte {
	lay := legacyLayout[t]
	b := make([]byte, t.BlockBytes())
	binary.LittleEndian.PutUint16(b, d)
	if lay.m >= 0 {
		binary.LittleEndian.PutUint16(b[lay.m:], m)
	}
	if t == dtype.Q8_0 {
		for j, v := range q {
			b[2+j] = byte(int8(v))
		}
		return b
	}
	var qh uint32
	for j := 0; j < 16; j++ {
		b[lay.qs+j] = byte(q[j]&15 | (q[j+16]&15)<<4)
	}
	for j, v := range q {
		qh |= uint32(v>>4&1) << j
	}
	if lay.qh >= 0 {
		binary.LittleEndian.PutUint32(b[lay.qh:], qh)
	}
	return b
}

// legacyAct encodes one activation block (block_q8_0, or block_q8_1 with s) from fp16 bits.
func legacyAct(a kernels.Act, d, s uint16, q [32]int) []byte {
	off := 2
	if a == kernels.ActQ8_1 {
		off = 4
	}
	b := make([]byte, off+32)
	binary.LittleEndian.PutUint16(b, d)
	if a == kernels.ActQ8_1 {
		binary.LittleEndian.PutUint16(b[2:], s)
	}
	for j, v := range q {
		b[off+j] = byte(int8(v))
	}
	return b
}

// legacySpecialHalves are fp16 scales at the edges: ±0, the smallest and largest subnormal,
// the smallest normal, 1, the largest finite, ±Inf, NaNs.
var legacySpecialHalves = []uint16{0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
	0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00}

func sameOrNaN(got, want float32) bool {
	if want != want {
		return math.Float32bits(got) == num.NaNBits
	}
	return math.Float32bits(got) == math.Float32bits(want)
}

// Decode agrees with host/quant's Dequantize (ggml's dequantize_row_*) bit for bit, except
// that a NaN is the canonical NaN.
func TestLegacyDecodeMatchesHost(t *testing.T) {
	for _, wt := range legacyTypes {
		t.Run("type="+wt.String(), func(t *testing.T) {
			f, err := kernels.Lookup(wt)
			if err != nil {
				t.Fatal(err)
			}
			q, err := quant.Lookup(wt)
			if err != nil {
				t.Fatal(err)
			}
			lay := legacyLayout[wt]
			bb := wt.BlockBytes()
			r := rand.New(rand.NewPCG(uint64(wt), 11))
			var rows [][]byte
			// random bytes, and random bytes with a finite scale
			for k := 0; k < 2; k++ {
				row := make([]byte, 512*bb)
				for i := range row {
					row[i] = byte(r.Uint32())
				}
				if k == 1 {
					for i := 0; i < 512; i++ {
						binary.LittleEndian.PutUint16(row[i*bb:], num.F32ToF16(float32(r.NormFloat64())))
					}
				}
				rows = append(rows, row)
			}
			// every value of each fp16 field, with random quants and the other field random
			halves := []int{0}
			if lay.m >= 0 {
				halves = append(halves, lay.m)
			}
			for _, off := range halves {
				row := make([]byte, 65536*bb)
				for i := range row {
					row[i] = byte(r.Uint32())
				}
				for h := 0; h < 65536; h++ {
					b := row[h*bb:]
					for _, o := range halves {
						binary.LittleEndian.PutUint16(b[o:], num.F32ToF16(float32(r.NormFloat64())))
					}
					binary.LittleEndian.PutUint16(b[off:], uint16(h))
				}
				rows = append(rows, row)
			}
			// the extreme quants with special scales
			var row []byte
			for _, qv := range []int{0, 15, 31, 127, -128, 8, 16} {
				var qq [32]int
				for j := range qq {
					qq[j] = qv
				}
				for _, d := range legacySpecialHalves {
					for _, m := range legacySpecialHalves {
						row = append(row, legacyBlock(wt, d, m, qq)...)
					}
				}
			}
			rows = append(rows, row)
			for k, row := range rows {
				n := len(row) / bb * 32
				got, want := make([]float32, n), make([]float32, n)
				f.Decode(got, row)
				q.Dequantize(want, row)
				for i := range want {
					if !sameOrNaN(got[i], want[i]) {
						blk := row[i/32*bb : (i/32+1)*bb]
						t.Fatalf("set %d, value %d (block % x): got %#08x (%g), want %#08x (%g)",
							k, i, blk, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
					}
				}
			}
		})
	}
}

// legacyUnit is one nonzero unit of a hand-computed case.
type legacyUnit struct {
	u      int // unit index in the row
	d, m   uint16
	q      [32]int // raw weight quants
	dx, sx uint16
	a      [32]int // activation quants
}

func seq(f func(j int) int) (q [32]int) {
	for j := range q {
		q[j] = f(j)
	}
	return q
}

func pairs(vals ...int) (q [32]int) {
	copy(q[:], vals)
	return q
}

// Hand-computed cases: one or two nonzero units in a row, known scales and quants, and the
// exact float32 the contract gives. fp16 bits: 0x3a00 = 0.75, 0x3000 = 0.125, 0xbe00 = −1.5,
// 0x4200 = 3, 0x2000 = 2⁻⁷, 0x3c01 = 1+2⁻¹⁰, 0x3d29 = 1321/1024.
func TestLegacyHandComputed(t *testing.T) {
	ramp := seq(func(j int) int { return j - 16 }) // activation quants −16 … 15, Σ = −16
	// Rounding cases: unit 0 leaves lane 0 at 2⁻¹⁴; unit 32 (also lane 0) has the exact
	// product S·d·d_x = 793·(1025/1024)·(1321/1024) = 2¹⁰ + 2⁻²⁰. One fused rounding of
	// 2⁻¹⁴ + 2¹⁰ + 2⁻²⁰ gives 2¹⁰ + 2⁻¹³; rounding the product first (to 2¹⁰) would leave a
	// tie that rounds to even, 2¹⁰.
	lane0 := func(q [32]int) legacyUnit {
		return legacyUnit{u: 0, d: 0x2000, q: q, dx: 0x2000, a: pairs(1)}
	}
	big := func(q, a [32]int) legacyUnit { return legacyUnit{u: 32, d: 0x3c01, q: q, dx: 0x3d29, a: a} }
	const fused = 1024 + 1.0/8192
	cases := []struct {
		name  string
		t     dtype.Type
		cols  int
		units []legacyUnit
		want  float32
	}{
		// S = Σ (q_j−8)·(j−16), q_j = j (j < 16), 31−j (j ≥ 16): 8; 8·0.75·0.125 = 0.75
		{"ramp", dtype.Q4_0, 32, []legacyUnit{{d: 0x3a00, q: seq(func(j int) int { return min(j, 31-j) }), dx: 0x3000, a: ramp}}, 0.75},
		// S = Σ (127−8j)·(±4j) = 7744; 7744·0.09375 = 726
		{"ramp", dtype.Q8_0, 32, []legacyUnit{{d: 0x3a00, q: seq(func(j int) int { return 127 - 8*j }), dx: 0x3000,
			a: seq(func(j int) int { return (1 - 2*(j&1)) * 4 * j })}}, 726},
		// q_j = 7j mod 32 (qh = 0xcc673398), S = Σ (q_j−16)·(j−16) = 336; 336·0.09375 = 31.5
		{"ramp", dtype.Q5_0, 32, []legacyUnit{{d: 0x3a00, q: seq(func(j int) int { return 7 * j % 32 }), dx: 0x3000, a: ramp}}, 31.5},
		// S = Σ (j mod 16)·(j−16) = 560; s = 3 is used as given (d_x·Σa would be −2):
		// 560·0.09375 + (−1.5)·3 = 52.5 − 4.5 = 48
		{"ramp", dtype.Q4_1, 32, []legacyUnit{{d: 0x3a00, m: 0xbe00, q: seq(func(j int) int { return j % 16 }), dx: 0x3000, sx: 0x4200, a: ramp}}, 48},
		// S = Σ (7j mod 32)·(j−16) = 80; 80·0.09375 − 4.5 = 3
		{"ramp", dtype.Q5_1, 32, []legacyUnit{{d: 0x3a00, m: 0xbe00, q: seq(func(j int) int { return 7 * j % 32 }), dx: 0x3000, sx: 0x4200, a: ramp}}, 3},
		// S = 127·6 + 31·1 = 793
		{"fma", dtype.Q8_0, 33 * 32, []legacyUnit{lane0(pairs(1)), big(pairs(127, 31), pairs(6, 1))}, fused},
		// S = (15−8)·113 + (9−8)·2 = 793
		{"fma", dtype.Q4_0, 33 * 32, []legacyUnit{lane0(pairs(9)), big(pairs(15, 9), pairs(113, 2))}, fused},
		// S = (31−16)·52 + (29−16)·1 = 793
		{"fma", dtype.Q5_0, 33 * 32, []legacyUnit{lane0(pairs(17)), big(pairs(31, 29), pairs(52, 1))}, fused},
		// With a minimum the unit's value t = fma(S, d·d_x, m·s) is rounded before it joins
		// the lane: t = 2¹⁰, and 2⁻¹⁴ + 2¹⁰ is a tie that rounds to 2¹⁰.
		// S = 15·52 + 13·1 = 793
		{"round", dtype.Q4_1, 33 * 32, []legacyUnit{lane0(pairs(1)), big(pairs(15, 13), pairs(52, 1))}, 1024},
		// S = 31·25 + 18·1 = 793
		{"round", dtype.Q5_1, 33 * 32, []legacyUnit{lane0(pairs(1)), big(pairs(31, 18), pairs(25, 1))}, 1024},
		// +Inf and −Inf units meet in lane 0: the canonical NaN
		{"inf", dtype.Q4_1, 33 * 32, []legacyUnit{{m: 0x7c00, dx: 0x3c00, sx: 0x3c00}, {u: 32, m: 0xfc00, dx: 0x3c00, sx: 0x3c00}},
			math.Float32frombits(num.NaNBits)},
		// d = +Inf with S = 0: Inf·0 is the canonical NaN
		{"inf", dtype.Q8_0, 32, []legacyUnit{{d: 0x7c00, dx: 0x3c00}}, math.Float32frombits(num.NaNBits)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("type=%s/case=%s", c.t, c.name), func(t *testing.T) {
			f, err := kernels.Lookup(c.t)
			if err != nil {
				t.Fatal(err)
			}
			bb, ab := c.t.BlockBytes(), f.Act.RowBytes(32)
			w, x := make([]byte, c.cols/32*bb), make([]byte, f.Act.RowBytes(c.cols))
			for _, u := range c.units {
				copy(w[u.u*bb:], legacyBlock(c.t, u.d, u.m, u.q))
				copy(x[u.u*ab:], legacyAct(f.Act, u.dx, u.sx, u.a))
			}
			if got := f.Dot(w, x, c.cols); !sameOrNaN(got, c.want) {
				t.Errorf("got %#08x (%g), want %#08x (%g)", math.Float32bits(got), got, math.Float32bits(c.want), c.want)
			}
		})
	}
}

// q81Shift is what block_q8_1's rounded s field adds to a q4_1 or q5_1 matvec beyond the
// exact product of the stored values: Σ_b m_b·(s_b − d_b·Σq_b) over the blocks of one weight
// row w and one activation row x, m_b being the weight block's fp16 minimum (bytes 2:4 in
// both types). ggml's dot products use s in the same way.
func q81Shift(w, x []byte, blockBytes int) float64 {
	var sum float64
	for b := 0; b < len(x)/36; b++ {
		a := x[36*b : 36*b+36]
		var sq int
		for _, q := range a[4:] {
			sq += int(int8(q))
		}
		m := float64(num.F16ToF32(binary.LittleEndian.Uint16(w[b*blockBytes+2:])))
		d := float64(num.F16ToF32(binary.LittleEndian.Uint16(a)))
		s := float64(num.F16ToF32(binary.LittleEndian.Uint16(a[2:])))
		sum += m * (s - d*float64(sq))
	}
	return sum
}

// BenchmarkLegacyDot measures one row's dot product (ns/op = ns per row; GB/s of weight bytes).
func BenchmarkLegacyDot(b *testing.B) {
	for _, wt := range legacyTypes {
		for _, cols := range []int{2048, 8192} {
			b.Run(fmt.Sprintf("type=%s/cols=%d", wt, cols), func(b *testing.B) {
				f, _ := kernels.Lookup(wt)
				q, _ := quant.Lookup(wt)
				r := rand.New(rand.NewPCG(1, 2))
				rb, _ := wt.RowBytes(int64(cols))
				w := make([]byte, rb)
				q.Quantize(w, randF32(r, cols, 1))
				x := make([]byte, f.Act.RowBytes(cols))
				kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
				b.SetBytes(rb)
				var sink float32
				for b.Loop() {
					sink += f.Dot(w, x, cols)
				}
				_ = sink
				b.ReportMetric(float64(rb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
