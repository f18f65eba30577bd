package kernels_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/repack"
)

// The vector forms of PackedDot give the portable Go function's bits on newDotCase's rows,
// in each of its modes. The test counts the results that are NaN or infinite, so that it
// cannot pass on them alone.
func TestVectorDotMatchesPortable(t *testing.T) {
	tested := 0
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		if !kernels.HasVectorDot(f) {
			continue
		}
		tested++
		portable := kernels.PortablePackedDot(f)
		t.Run(wt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(wt), 77))
			const trials = 400
			nonFinite := [4]int{}
			for trial := 0; trial < trials; trial++ {
				mode := trial % 4
				c := newDotCase(r, f, mode, 1)
				got, want := f.PackedDot(&c.l, c.row, c.x), portable(&c.l, c.row, c.x)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("trial %d (%d values, mode %d): vector %v (%#08x), portable %v (%#08x)",
						trial, c.l.RowValues, mode, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				if math.IsNaN(float64(want)) || math.IsInf(float64(want), 0) {
					nonFinite[mode]++
				}
			}
			for mode, n := range nonFinite[:3] {
				if n > trials/4/10 {
					t.Errorf("mode %d: %d of %d results NaN or infinite: the comparison is mostly vacuous", mode, n, trials/4)
				}
			}
		})
	}
	if isa := kernels.VectorISA(); (isa == "") != (tested == 0) {
		t.Errorf("VectorISA %q with %d vector forms", isa, tested)
	}
	t.Logf("vector forms: %d (%q)", tested, kernels.VectorISA())
}

// The matvec twin's products of one weight row with several activation rows (the
// several-column vector forms where a type has one) give each column PackedDot's bits: 1 to
// 20 columns, the same modes as above.
func TestRowDotsMatchPackedDot(t *testing.T) {
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		if f.PackedDot == nil {
			continue
		}
		t.Run(wt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(wt), 78))
			for trial := 0; trial < 120; trial++ {
				mode, n := trial%4, 1+r.IntN(20)
				c := newDotCase(r, f, mode, n)
				got := make([]float32, n)
				kernels.RowDots(f, &c.l, c.row, c.x, c.xb, got)
				for col := range got {
					want := f.PackedDot(&c.l, c.row, c.x[col*c.xb:(col+1)*c.xb])
					if math.Float32bits(got[col]) != math.Float32bits(want) {
						t.Fatalf("trial %d (%d values, mode %d, %d columns): column %d %v (%#08x), PackedDot %v (%#08x)",
							trial, c.l.RowValues, mode, n, col, got[col], math.Float32bits(got[col]), want, math.Float32bits(want))
					}
				}
			}
		})
	}
}

// dotCase is one packed weight row and n activation rows of xb bytes each.
type dotCase struct {
	l      repack.Layout
	row, x []byte
	xb     int
}

// newDotCase draws a row for format f. Modes: random quants with normal scales; extreme
// quants (0x00, 0xff, 0x80, 0x7f); finite special scales (±0, fp16 and float32 subnormals,
// the largest fp16, tiny and large float32 d); exactly one NaN or ±Inf scale per activation
// row or in the weights. Rows of 1 to 40 super-blocks (every position of a super-block in the
// interleaved planes), legacy rows of any number of blocks, float rows of any number of units
// (values by floatRow's modes). Quants, activation quants and bsums need not agree.
func newDotCase(r *rand.Rand, f *kernels.Format, mode, n int) dotCase {
	finite16 := []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x3c00, 0x7bff, 0xfbff}
	special16 := []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00}
	finite32 := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, 1e-40, 1.2e-38, 1, -3.5e-3, 6e4}
	special32 := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	wt := f.Type
	blocks := 1 + r.IntN(40)
	cols := 256 * blocks
	if wt.BlockSize() == 32 { // legacy blocks: any number (tails of a chunk of 8)
		cols = 32 * (1 + r.IntN(300))
	}
	if wt.BlockSize() == 1 { // float rows: any whole number of units (tails)
		cols = f.Unit * (1 + r.IntN(1200/f.Unit))
		blocks = 0
	}
	l, err := repack.NewLayout(wt, []int64{int64(cols)})
	if err != nil {
		panic(err)
	}
	xb := f.Act.RowBytes(cols)
	row, x := make([]byte, l.RowStride), make([]byte, n*xb)
	for _, b := range [][]byte{row, x} {
		for i := range b {
			if mode == 1 {
				b[i] = []byte{0x00, 0xff, 0x80, 0x7f}[r.IntN(4)]
			} else {
				b[i] = byte(r.Uint32())
			}
		}
	}
	if wt.BlockSize() == 1 {
		floatRow(r, wt, row[:l.RowBytes], mode)
		for c := 0; c < n; c++ {
			floatRow(r, wt, x[c*xb:(c+1)*xb], mode)
		}
	}
	// the fp16 scale fields of the weights (and of q8_0 activations) and the float32 d of
	// q8_K activations
	var f16At []int64
	for b := int64(0); b < l.Blocks*l.F16Fields; b++ {
		f16At = append(f16At, l.F16Off+2*b)
	}
	for _, at := range f16At {
		h := uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
		if mode == 2 && r.IntN(4) == 0 {
			h = finite16[r.IntN(len(finite16))]
		}
		binary.LittleEndian.PutUint16(row[at:], h)
	}
	for c := 0; c < n; c++ {
		xr := x[c*xb : (c+1)*xb]
		var xf16At, xf32At []int
		switch f.Act {
		case kernels.ActQ8_K:
			for b := 0; b < blocks; b++ {
				xf32At = append(xf32At, 292*b)
			}
		case kernels.ActQ8_0:
			for b := 0; b < cols/32; b++ {
				xf16At = append(xf16At, 34*b)
			}
		case kernels.ActQ8_1: // d and s
			for b := 0; b < cols/32; b++ {
				xf16At = append(xf16At, 36*b, 36*b+2)
			}
		}
		for _, at := range xf16At {
			h := uint16(0x1c00+r.IntN(0x2000)) | uint16(r.IntN(2))<<15
			if mode == 2 && r.IntN(4) == 0 {
				h = finite16[r.IntN(len(finite16))]
			}
			binary.LittleEndian.PutUint16(xr[at:], h)
		}
		for _, at := range xf32At {
			d := float32(r.NormFloat64() * 1e-2)
			if mode == 2 && r.IntN(3) == 0 {
				d = finite32[r.IntN(len(finite32))]
			}
			binary.LittleEndian.PutUint32(xr[at:], math.Float32bits(d))
		}
		if mode == 3 && wt.BlockSize() > 1 { // one NaN or infinite scale
			k := r.IntN(len(f16At) + len(xf16At) + len(xf32At))
			switch {
			case k < len(f16At):
				if c == 0 {
					binary.LittleEndian.PutUint16(row[f16At[k]:], special16[r.IntN(len(special16))])
				}
			case k < len(f16At)+len(xf16At):
				binary.LittleEndian.PutUint16(xr[xf16At[k-len(f16At)]:], special16[r.IntN(len(special16))])
			default:
				binary.LittleEndian.PutUint32(xr[xf32At[k-len(f16At)-len(xf16At)]:], math.Float32bits(special32[r.IntN(len(special32))]))
			}
		}
	}
	return dotCase{l: l, row: row, x: x, xb: xb}
}

// BenchmarkPackedDot: the matvec twin's inner loop, one packed row times one activation row,
// for every weight type; vector forms against their portable Go functions.
func BenchmarkPackedDot(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		if f.PackedDot == nil {
			continue
		}
		forms := map[string]func(l *repack.Layout, row, x []byte) float32{"go": kernels.PortablePackedDot(f)}
		if kernels.HasVectorDot(f) {
			forms[kernels.VectorISA()] = f.PackedDot
		}
		for _, cols := range []int{2048, 8192} {
			rb, _ := wt.RowBytes(int64(cols))
			row := make([]byte, rb)
			if wt.BlockSize() > 1 {
				l, _ := repack.NewLayout(wt, []int64{int64(cols)})
				p, _ := repack.Pack(wt, []int64{int64(cols)}, row)
				for i := range p.Data {
					p.Data[i] = byte(r.Uint32())
				}
				for i := 0; i < int(l.Blocks*l.F16Fields); i++ {
					binary.LittleEndian.PutUint16(p.Data[l.F16Off+2*int64(i):], uint16(r.IntN(0x7800)))
				}
				row, _ = repack.Unpack(p)
			} else {
				row = f32Row(r, wt, cols)
			}
			p, err := repack.Pack(wt, []int64{int64(cols)}, row)
			if err != nil {
				b.Fatal(err)
			}
			x := make([]byte, f.Act.RowBytes(cols))
			kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
			for name, dot := range forms {
				b.Run(fmt.Sprintf("type=%s/cols=%d/%s", wt, cols, name), func(b *testing.B) {
					b.SetBytes(rb)
					var sink float32
					for b.Loop() {
						sink += dot(&p.Layout, p.Data, x)
					}
					_ = sink
				})
			}
		}
	}
}

// floatValues returns n float32 values drawn as floatRow draws them in mode.
func floatValues(r *rand.Rand, n, mode int) []float32 {
	b := make([]byte, 4*n)
	floatRow(r, dtype.F32, b, mode)
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// floatRow fills b with values of float type wt (f32, f16 or bf16): mode 0 normal values;
// 1 magnitudes spread from the subnormals to 2^40 (f16: 2^10; no product or sum of a test
// overflows);
// 2 normal values with one in 16 a finite special (±0, subnormals, the largest f16); 3 normal
// values with exactly one ±Inf or NaN.
func floatRow(r *rand.Rand, wt dtype.Type, b []byte, mode int) {
	finite := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 6e-8, -6.1e-5, 65504}
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	size := len(b) / wt.BlockBytes()
	bad := -1
	if mode == 3 {
		bad = r.IntN(size)
	}
	for i := 0; i < size; i++ {
		v := float32(r.NormFloat64())
		switch {
		case mode == 1 && wt == dtype.F16: // its range: subnormals from 2^-24, at most 65504
			v = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(38)-28)))
		case mode == 1:
			v = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(190)-150)))
		case mode == 2 && r.IntN(16) == 0:
			v = finite[r.IntN(len(finite))]
		case i == bad:
			v = specials[r.IntN(len(specials))]
		}
		switch wt {
		case dtype.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case dtype.F16:
			binary.LittleEndian.PutUint16(b[2*i:], num.F32ToF16(v))
		default:
			binary.LittleEndian.PutUint16(b[2*i:], num.F32ToBF16(v))
		}
	}
}

// The lane fold the dot products use has num.WarpTotal's bits: normal, spread and special
// lanes (±0, ±Inf, NaN with any payload, subnormals, overflowing sums).
func TestLaneSumMatchesWarpTotal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 20000; trial++ {
		var v [32]float32
		copy(v[:], floatValues(r, 32, trial%4))
		if trial%7 == 0 {
			v[r.IntN(32)] = math.Float32frombits(0xffc00000 | r.Uint32()&0x3fffff) // a CPU NaN
		}
		if trial%11 == 0 {
			v[r.IntN(32)], v[r.IntN(32)] = math.MaxFloat32, math.MaxFloat32
		}
		want := num.WarpTotal(&v)
		if got := kernels.LaneSum(&v); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("trial %d: %v (%#08x), WarpTotal %v (%#08x); lanes %v", trial, got, math.Float32bits(got), want, math.Float32bits(want), v)
		}
	}
}

// BenchmarkPackedDotMatrix: PackedDot over every row of a 64 MiB-class matrix (out of cache),
// one thread: the twin's matvec streaming rate per weight type.
func BenchmarkPackedDotMatrix(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		if f.PackedDot == nil || wt.BlockSize() == 1 {
			continue
		}
		for _, cols := range []int{2048, 8192} {
			rb, _ := wt.RowBytes(int64(cols))
			rows := int((96 << 20) / rb)
			l, _ := repack.NewLayout(wt, []int64{int64(cols), int64(rows)})
			data := make([]byte, l.Size())
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			for row := 0; row < rows; row++ { // finite fp16 scales
				for i := 0; i < int(l.Blocks*l.F16Fields); i++ {
					binary.LittleEndian.PutUint16(data[int64(row)*l.RowStride+l.F16Off+2*int64(i):], uint16(r.IntN(0x7800)))
				}
			}
			x := make([]byte, f.Act.RowBytes(cols))
			kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
			for _, ahead := range []int{0, 1, 2, 4} {
				b.Run(fmt.Sprintf("type=%s/cols=%d/prefetch=%d", wt, cols, ahead), func(b *testing.B) {
					b.SetBytes(int64(rows) * rb)
					var sink float32
					for b.Loop() {
						for row := 0; row < rows; row++ {
							if ahead > 0 && row+ahead < rows {
								kernels.Prefetch(data[int64(row+ahead)*l.RowStride:][:l.RowStride])
							}
							sink += f.PackedDot(&l, data[int64(row)*l.RowStride:], x)
						}
					}
					_ = sink
				})
			}
		}
	}
}

// The attention twin's vector forms give the portable Go bits: head sizes with and without
// them (multiples of 32, of 8 only, neither), key counts around the groups of 8, slots in any
// order, queries, keys and values by floatRow's modes (normal; spread magnitudes; finite
// specials; one NaN or infinity in the cache). The test counts the heads whose output is not
// finite, so that it cannot pass on them alone.
func TestVectorAttentionMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const trials = 60
	for _, hd := range []int{8, 12, 20, 24, 32, 40, 64, 128, 256} {
		nonFinite := [4]int{}
		for trial := 0; trial < trials; trial++ {
			nkv, slots := 1+r.IntN(3), 1+r.IntN(80)
			stride := nkv * hd
			mode := trial % 4
			fill := func(n, mode int) []float32 { return floatValues(r, n, mode) }
			kc, vc := fill(slots*stride, mode), fill(slots*stride, mode)
			q := fill(hd, min(mode, 2)) // one special value, in the cache only
			if mode == 1 {              // spread keys and values, normal queries
				q = fill(hd, 0)
			}
			n := 1 + r.IntN(70)
			offs := make([]int64, n)
			kvh := r.IntN(nkv)
			for j := range offs {
				offs[j] = int64(r.IntN(slots)*stride + kvh*hd)
			}
			scale := float32(1 / math.Sqrt(float64(hd)))
			got, want := make([]float32, hd), make([]float32, hd)
			kernels.AttendHead(got, q, kc, vc, offs, scale, true)
			kernels.AttendHead(want, q, kc, vc, offs, scale, false)
			finite := true
			for d := range got {
				if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
					t.Fatalf("hd %d trial %d (%d keys, mode %d): out[%d] vector %v (%#08x), portable %v (%#08x)",
						hd, trial, n, mode, d, got[d], math.Float32bits(got[d]), want[d], math.Float32bits(want[d]))
				}
				finite = finite && !math.IsNaN(float64(want[d])) && !math.IsInf(float64(want[d]), 0)
			}
			if !finite {
				nonFinite[mode]++
			}
		}
		for mode, k := range nonFinite[:3] {
			if k > 0 {
				t.Errorf("hd %d mode %d: %d of %d heads not finite", hd, mode, k, trials/4)
			}
		}
	}
}

// The four-head score form gives each head the portable chain's score: head sizes of multiples
// of 8, every key count of a chunk, random slots, floatRow's modes (NaN scores compared as
// NaN: the scores reach the output only through Max32 and Exp32, which canonicalise them).
func TestVectorScores4MatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	var e [4 * kernels.AttnChunk]float32
	if kernels.Scores4(&e, make([]float32, 32), make([]float32, 8), []int64{0}, 1) == 0 {
		t.Skip("no vector forms on this CPU")
	}
	for _, hd := range []int{8, 16, 24, 32, 64, 128, 256} {
		for n := 1; n <= kernels.AttnChunk; n++ {
			mode := n % 4
			slots := 1 + r.IntN(80)
			kc := floatValues(r, slots*hd, mode)
			q := floatValues(r, 4*hd, min(mode, 2))
			offs := make([]int64, n)
			for j := range offs {
				offs[j] = int64(r.IntN(slots) * hd)
			}
			scale := float32(1 / math.Sqrt(float64(hd)))
			if got := kernels.Scores4(&e, q, kc, offs, scale); got != n {
				t.Fatalf("hd %d: %d of %d keys scored", hd, got, n)
			}
			for h := 0; h < 4; h++ {
				for j, off := range offs {
					var dot float32
					for d := 0; d < hd; d++ {
						dot = num.FMA32(q[h*hd+d], kc[off+int64(d)], dot)
					}
					want, got := float32(dot*scale), e[h*kernels.AttnChunk+j]
					if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
						t.Fatalf("hd %d, %d keys, head %d key %d: %v (%#08x), want %v (%#08x)", hd, n, h, j, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

// BenchmarkAttendHead: one head of one row over a 2048-key history (the design's verify shape).
func BenchmarkAttendHead(b *testing.B) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, hd := range []int{64, 128} {
		const keys, nkv = 2048, 8
		kc, vc := randF32(r, keys*nkv*hd, 1), randF32(r, keys*nkv*hd, 1)
		q := randF32(r, hd, 1)
		offs := make([]int64, keys)
		for j := range offs {
			offs[j] = int64(j * nkv * hd)
		}
		out := make([]float32, hd)
		for _, vector := range []bool{false, true} {
			b.Run(fmt.Sprintf("hd=%d/vector=%v", hd, vector), func(b *testing.B) {
				for b.Loop() {
					kernels.AttendHead(out, q, kc, vc, offs, 0.125, vector)
				}
			})
		}
	}
}

// The vector Exp32 gives num.Exp32's bits: every 509th float32 bit pattern (all classes:
// NaNs, ±Inf, subnormals, the overflow and underflow edges) and a dense sweep of [−130, 130],
// shifted by m = 0 and by a few other maxima.
func TestVectorExp32MatchesExp32(t *testing.T) {
	if n := kernels.ExpShift(make([]float32, 8), 0); n == 0 {
		t.Skip("no vector forms on this CPU")
	}
	check := func(xs []float32, m float32) {
		e := append([]float32(nil), xs...)
		n := kernels.ExpShift(e, m)
		for i := 0; i < n; i++ {
			want := num.Exp32(xs[i] - m)
			if math.Float32bits(e[i]) != math.Float32bits(want) {
				t.Fatalf("Exp32(%v − %v) = %v (%#08x), want %v (%#08x)", xs[i], m, e[i], math.Float32bits(e[i]), want, math.Float32bits(want))
			}
		}
	}
	xs := make([]float32, 0, 1<<16)
	flush := func(m float32) {
		if len(xs) == cap(xs) {
			check(xs, m)
			xs = xs[:0]
		}
	}
	for u := uint64(0); u < 1<<32; u += 509 {
		xs = append(xs, math.Float32frombits(uint32(u)))
		flush(0)
	}
	check(xs[:len(xs)&^7], 0)
	xs = xs[:0]
	for _, m := range []float32{0, 1.5, -3, 87.5} {
		for x := float32(-130); x <= 130; x += 1.0 / 1024 {
			xs = append(xs, x+m)
			flush(m)
		}
		check(xs[:len(xs)&^7], m)
		xs = xs[:0]
	}
	// every length of a last group shorter than 8, after whole groups and alone
	sp := []float32{0, -0.5, 3, float32(math.Inf(-1)), 88, -104, float32(math.NaN()), 1e-30, 2, -1, 7, 0.25, -90, 42, 5, 6, -7}
	for n := 1; n <= len(sp); n++ {
		if got := kernels.ExpShift(append([]float32(nil), sp[:n]...), 1.5); got != n {
			t.Fatalf("%d values: the vector form set %d", n, got)
		}
		check(sp[:n], 1.5)
	}
}

// SwiGLU's vector form gives the portable bits: every 509th float32 bit pattern as the gate
// (every class and the ±128 edges), a dense sweep of [−130, 130], against random, zero,
// infinite and NaN up-projections.
func TestVectorSwiGLUMatchesPortable(t *testing.T) {
	checkBinaryVector(t, 31, "SiLU(x)·y", func(y, x, other []float32, vector bool) { kernels.SwiGLURow(y, x, other, vector) })
}

// BenchmarkRowDots: one weight row times 8 activation rows (a tree's nodes), through the
// matvec twin's several-column path and as 8 separate dot products.
func BenchmarkRowDots(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		if f.PackedDot == nil || wt.BlockSize() == 1 {
			continue
		}
		c := newDotCase(r, f, 0, 8)
		out := make([]float32, 8)
		b.Run(fmt.Sprintf("type=%s/columns", wt), func(b *testing.B) {
			for b.Loop() {
				kernels.RowDots(f, &c.l, c.row, c.x, c.xb, out)
			}
		})
		b.Run(fmt.Sprintf("type=%s/separate", wt), func(b *testing.B) {
			for b.Loop() {
				for col := range out {
					out[col] = f.PackedDot(&c.l, c.row, c.x[col*c.xb:(col+1)*c.xb])
				}
			}
		})
	}
}

// Each several-column vector form, with and without VNNI (where the CPU has it), and over
// transposed activations (where the type has that form), gives every column PackedDot's bits.
func TestMultiDotsMatchPackedDot(t *testing.T) {
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		for _, form := range []string{"plain", "vnni", "transposed"} {
			vnni := form == "vnni"
			r := rand.New(rand.NewPCG(uint64(wt), 79))
			ran := 0
			for trial := 0; trial < 120; trial++ {
				mode, n := trial%4, 1+r.IntN(8)
				c := newDotCase(r, f, mode, n)
				if trial >= 116 && (wt == dtype.Q4_K || wt == dtype.Q5_K || wt == dtype.Q6_K) { // the 16-bit sums' bound: every quant its largest, every activation −128 or 127
					for _, pl := range c.l.Planes {
						for b := range c.l.Blocks * 8 * pl.Width { // eight units a block
							c.row[pl.Off+b] = 0xff
						}
					}
					for col := range n {
						for b := range int(c.l.Blocks) {
							q := c.x[col*c.xb+292*b+4:][:256]
							for i := range q {
								q[i] = []byte{0x80, 0x7f}[trial%2]
							}
						}
					}
				}
				got := make([]float32, n)
				if form == "transposed" && !kernels.MultiDotsTransposed(wt, &c.l, c.row, c.x, c.xb, got) ||
					form != "transposed" && !kernels.MultiDots(wt, &c.l, c.row, c.x, c.xb, got, vnni) {
					break
				}
				ran++
				for col := range got {
					want := f.PackedDot(&c.l, c.row, c.x[col*c.xb:(col+1)*c.xb])
					if math.Float32bits(got[col]) != math.Float32bits(want) {
						t.Fatalf("%s %s trial %d (%d values, mode %d, %d columns): column %d %v (%#08x), PackedDot %v (%#08x)",
							wt, form, trial, c.l.RowValues, mode, n, col, got[col], math.Float32bits(got[col]), want, math.Float32bits(want))
					}
				}
			}
			if ran > 0 {
				t.Logf("%s %s: %d trials", wt, form, ran)
			}
		}
	}
}

// The Gated DeltaNet state update's vector form gives the portable bits, state and output:
// head sizes 8 to 128, states by floatRow's modes (keys, queries and values normal or with
// finite specials), decays and write strengths from 0 to 1 and a few specials.
func TestVectorDeltaRuleMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	fill := func(n, mode int) []float32 { return floatValues(r, n, mode) }
	nonFinite := 0
	for trial := 0; trial < 200; trial++ {
		d := 8 * (1 + r.IntN(16))
		mode := trial % 4
		vm := map[int]int{0: 0, 1: 0, 2: 2, 3: 2}[mode] // spread magnitudes and specials: in the state only
		s0, q, k, v := fill(d*d, mode), fill(d, vm), fill(d, vm), fill(d, vm)
		if mode == 3 && trial%8 == 3 { // +Inf and −Inf in one column: NaNs made, not passed on
			j := r.IntN(d)
			s0[r.IntN(d/2)*d+j], s0[(d/2+r.IntN(d/2))*d+j] = float32(math.Inf(1)), float32(math.Inf(-1))
		}
		if mode == 3 && trial%8 == 7 { // an infinite state and a zero query: Inf·0 in the output
			s0[r.IntN(d)*d+r.IntN(d)] = float32(math.Inf(1))
			q[r.IntN(d)] = 0
		}
		e, b := float32(r.Float64()), float32(r.Float64())
		if trial%10 == 9 {
			e, b = []float32{0, 1, 1e-40}[r.IntN(3)], []float32{0, 1, 1e-40}[r.IntN(3)]
		}
		sv, sp := append([]float32(nil), s0...), append([]float32(nil), s0...)
		ov, op := make([]float32, d), make([]float32, d)
		if !kernels.DeltaRule(ov, sv, q, k, v, e, b, true) {
			t.Skip("no vector form on this CPU")
		}
		kernels.DeltaRule(op, sp, q, k, v, e, b, false)
		for i := range sv {
			if math.Float32bits(sv[i]) != math.Float32bits(sp[i]) {
				t.Fatalf("trial %d (d %d, mode %d): state[%d] vector %v (%#08x), portable %v (%#08x)", trial, d, mode, i, sv[i], math.Float32bits(sv[i]), sp[i], math.Float32bits(sp[i]))
			}
		}
		for j := range ov {
			if math.Float32bits(ov[j]) != math.Float32bits(op[j]) {
				t.Fatalf("trial %d (d %d, mode %d): out[%d] vector %v (%#08x), portable %v (%#08x)", trial, d, mode, j, ov[j], math.Float32bits(ov[j]), op[j], math.Float32bits(op[j]))
			}
			if mode < 3 && (math.IsNaN(float64(op[j])) || math.IsInf(float64(op[j]), 0)) {
				nonFinite++
			}
		}
	}
	if nonFinite > 0 {
		t.Errorf("%d outputs not finite in the finite modes", nonFinite)
	}
}

// The vector transpose of q8_K activation rows gives the portable transpose's bytes (rows of 1
// to 9 super-blocks, 1 to 5 of them, random bytes).
func TestTransposeQ8KMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for trial := 0; trial < 50; trial++ {
		blocks, n := 1+r.IntN(9), 1+r.IntN(5)
		xb := blocks * 292
		src := make([]byte, n*xb)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		want, got := make([]byte, n*xb), make([]byte, n*xb)
		kernels.TransposeQ8K(want, src, xb, n, blocks, false)
		kernels.TransposeQ8K(got, src, xb, n, blocks, true)
		if !bytes.Equal(got, want) {
			t.Fatalf("trial %d (%d blocks, %d rows): the vector transpose differs", trial, blocks, n)
		}
	}
}

// The vector chunk maximum gives maxOf's bits: NaNs passed over, +0 above −0, −Inf for no
// number, on lengths 1 to 70 of random, special and all-equal values.
func TestVectorMaxOfMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	special := []float32{nan, -inf, inf, 0, float32(math.Copysign(0, -1)), 1e-45, -1e-45}
	for trial := 0; trial < 3000; trial++ {
		e := make([]float32, 1+r.IntN(70))
		for i := range e {
			switch mode := trial % 4; {
			case mode == 0:
				e[i] = float32(r.NormFloat64())
			case mode == 1 || r.IntN(3) == 0:
				e[i] = special[r.IntN(len(special))]
			default:
				e[i] = -float32(r.ExpFloat64())
			}
		}
		want, got := kernels.MaxOf(e, false), kernels.MaxOf(e, true)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("trial %d: %v: vector %v (%#08x), portable %v (%#08x)", trial, e, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// The vector form of SigmoidMul's op gives the portable y·Sigmoid32(x)'s bits on the same
// inputs.
func TestVectorSigmoidMulMatchesPortable(t *testing.T) {
	checkBinaryVector(t, 33, "y·Sigmoid32(x)", func(out, x, other []float32, vector bool) { kernels.SigmoidMulRow(out, other, x, vector) })
}

// checkBinaryVector compares an element-wise op of x (the argument of its exponential) and
// another operand with and without its vector form, bit for bit: every 509th float32 bit
// pattern as x (NaNs, infinities, subnormals and ±0 among them) and a fine grid over
// [−130, 130] (both sides of ±128 and of 0), the other operand normal with a sixteenth
// special values.
func checkBinaryVector(t *testing.T, seed uint64, name string, op func(out, x, other []float32, vector bool)) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40, 3e38}
	check := func(x []float32) {
		other := make([]float32, len(x))
		for i := range other {
			other[i] = float32(r.NormFloat64())
			if r.IntN(16) == 0 {
				other[i] = specials[r.IntN(len(specials))]
			}
		}
		got, want := make([]float32, len(x)), make([]float32, len(x))
		op(got, x, other, true)
		op(want, x, other, false)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s with x = %v, y = %v: %v (%#08x), want %v (%#08x)", name, x[i], other[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	x := make([]float32, 0, 1<<16)
	for u := uint64(0); u < 1<<32; u += 509 {
		if x = append(x, math.Float32frombits(uint32(u))); len(x) == cap(x) {
			check(x)
			x = x[:0]
		}
	}
	check(x)
	x = x[:0]
	for v := float32(-130); v <= 130; v += 1.0 / 2048 {
		x = append(x, v)
	}
	check(x)
}
