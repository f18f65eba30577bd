//go:build amd64 && !purego

package kernels

import (
	"github.com/klauspost/cpuid/v2"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// The twin's vector forms (simd_amd64.s), used where the CPU has AVX2, FMA and F16C: every
// weight type's PackedDot, several-column forms, the lane fold, attention, Exp32, SiLU and the
// delta rule. The dot products compute the integer unit sums with vector instructions (exact)
// and fold them with hardware fused multiply-adds (IEEE, round to nearest, subnormals kept: Go
// never sets the flush-to-zero modes) into the same lane accumulators in the same order, so
// their results are the Go functions' bits; NaN payloads may differ inside the lanes, and the
// lane sum makes every NaN the canonical one. Tests compare every form with its Go function.

//go:noescape
func q4KDotAVX2(plane, scales, d, x *byte, blocks int, acc *[32]float32)

//go:noescape
func q6KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)

//go:noescape
func q6KRowsAVX2(w, x *byte, a *rowsArgs, out *float32)

//go:noescape
func q4KRowsAVX2(w, x *byte, a *rowsArgs, out *float32)

//go:noescape
func prepQ4KRowsAVX2(dst, x *byte, blocks int)

//go:noescape
func transposeQ8KAVX2(dst, src *byte, blocks int)

// vectorTransposeQ8K is transposeQ8K's quant moves for one row of blocks super-blocks (dst
// already holding the row's scales and block sums), and reports whether it ran.
func vectorTransposeQ8K(dst, src []byte, blocks int) bool {
	if !vectorCPU || blocks < 1 {
		return false
	}
	_, _ = dst[:blocks*q8KBytes], src[:blocks*q8KBytes]
	transposeQ8KAVX2(&dst[0], &src[0], blocks)
	return true
}

//go:noescape
func maxOfAVX2(e *float32, n int) float32

// vectorMaxOf is maxOf with vector maxima, and reports whether it ran: not for a zero maximum,
// whose sign the vector form does not settle.
func vectorMaxOf(e []float32) (float32, bool) {
	if !vectorCPU || len(e) == 0 {
		return 0, false
	}
	m := maxOfAVX2(&e[0], len(e))
	return m, m != 0
}

//go:noescape
func laneSumsAVX2(acc *[32]float32, e *float32, n int)

// vectorLaneSum is num.WarpTotal of the lane sums acc[j mod 32] += e[j] (j in order, from
// zero), with vector adds (the same adds in the same order: the same bits), and reports
// whether it ran.
func vectorLaneSum(e []float32) (float32, bool) {
	if !vectorCPU || len(e) == 0 {
		return 0, false
	}
	var acc [32]float32
	laneSumsAVX2(&acc, &e[0], len(e))
	return vectorWarpTotal(&acc), true
}

//go:noescape
func foldColumnsAVX2(acc *float32, n int, y *float32, stride int, add, one bool)

//go:noescape
func q2KDotAVX2(plane, scales, d, x *byte, blocks int, acc *[32]float32)

//go:noescape
func q3KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)

//go:noescape
func q45KDotNAVX2(plane, high, scales, d, x *byte, xstride, ncols, blocks int, acc *float32, form multiForm)

//go:noescape
func q6KDotNAVX2(low, high, scales, d, x *byte, xstride, ncols, blocks int, acc *float32, form multiForm)

//go:noescape
func q5KDotAVX2(low, high, scales, d, x *byte, blocks int, acc *[32]float32)

//go:noescape
func q41DotAVX2(plane, d, m, x *byte, chunks int, acc *[32]float32)

//go:noescape
func q50DotAVX2(plane, qh, d, x *byte, chunks int, acc *[32]float32)

//go:noescape
func q51DotAVX2(plane, qh, d, m, x *byte, chunks int, acc *[32]float32)

//go:noescape
func q40DotAVX2(plane, d, x *byte, chunks int, acc *[32]float32)

//go:noescape
func q80DotAVX2(plane, d, x *byte, chunks int, acc *[32]float32)

//go:noescape
func attnScoresAVX2(e, q, kc *float32, offs *int64, groups, hd int, scale float32)

//go:noescape
func attnScores4AVX2(e *float32, es int, q *float32, qs int, kc *float32, offs *int64, groups, hd int, scale float32)

//go:noescape
func attnPV32AVX2(out, e, vc *float32, offs *int64, n int)

//go:noescape
func attnPV32x2AVX2(out *float32, os int, e *float32, es int, vc *float32, offs *int64, n int)

//go:noescape
func exp32ShiftAVX2(e *float32, n int, m float32)

//go:noescape
func sigmoidMulAVX2(y, a, b *float32, n int)

//go:noescape
func siluMulAVX2(y, a, b *float32, n int)

//go:noescape
func deltaRuleAVX2(o, s, q, k, v *float32, d int, e, b float32)

//go:noescape
func prefetchAVX(p *byte, n int)

// prefetch asks the caches for b (a hint: no fault, no effect on results).
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchAVX(&b[0], len(b))
	}
}

//go:noescape
func warpTotalAVX(v *[32]float32) float32

//go:noescape
func dotF32AVX2(w, x *float32, chunks int, acc *[32]float32)

//go:noescape
func dotF16AVX2(w, x *byte, chunks int, acc *[32]float32)

//go:noescape
func dotBF16AVX2(w, x *byte, chunks int, acc *[32]float32)

// vectorMultiForms: the weight types with a several-column vector form.
func vectorMultiForms() map[dtype.Type]multiDotFunc {
	if !vectorCPU {
		return nil
	}
	m := map[dtype.Type]multiDotFunc{}
	for t, form := range multiForms {
		m[t] = form(formOf(vectorVNNI))
	}
	return m
}

// vectorMultiTForms: the several-column forms over transposed activations (transposeQ8K), on
// a CPU without VNNI, where they spare each unit's horizontal adds; with VNNI the one
// dot-product instruction a unit of the VNNI form is kept (it has not run transposed).
func vectorMultiTForms() map[dtype.Type]multiDotFunc {
	if !vectorCPU || vectorVNNI {
		return nil
	}
	m := map[dtype.Type]multiDotFunc{}
	for t, form := range multiForms {
		m[t] = form(formTransposed)
	}
	return m
}

// vectorVNNI: the CPU has AVX-512 VNNI with 256-bit vectors (VL), for the several-column forms.
var vectorVNNI = vectorCPU && cpuid.CPU.Supports(cpuid.AVX512VNNI, cpuid.AVX512VL)

// vectorSupported reports whether the CPU runs the vector forms.
func vectorSupported() bool { return cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3, cpuid.F16C) }

func vectorForms() (map[dtype.Type]dotFunc, string) {
	if !vectorCPU {
		return nil, ""
	}
	return map[dtype.Type]dotFunc{
		dtype.Q2_K: kquantDot(func(l *repack.Layout, row, x []byte, acc *[32]float32) {
			q2KDotAVX2(&row[l.Planes[0].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], int(l.Blocks), acc)
		}),
		dtype.Q3_K: kquantDot(func(l *repack.Layout, row, x []byte, acc *[32]float32) {
			q3KDotAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], int(l.Blocks), acc)
		}),
		dtype.Q4_K: kquantDot(func(l *repack.Layout, row, x []byte, acc *[32]float32) {
			q4KDotAVX2(&row[l.Planes[0].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], int(l.Blocks), acc)
		}),
		dtype.Q5_K: kquantDot(func(l *repack.Layout, row, x []byte, acc *[32]float32) {
			q5KDotAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], int(l.Blocks), acc)
		}),
		dtype.Q6_K: kquantDot(func(l *repack.Layout, row, x []byte, acc *[32]float32) {
			q6KDotAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], int(l.Blocks), acc)
		}),
		dtype.Q4_0: legacyDot(34, q4_0Units, func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32) {
			q40DotAVX2(&row[l.Planes[0].Off], &row[l.F16Off], &x[0], chunks, acc)
		}),
		dtype.Q4_1: legacyDot(36, q4_1Units, func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32) {
			q41DotAVX2(&row[l.Planes[0].Off], &row[l.F16Off], &row[l.F16Off+2*l.Blocks], &x[0], chunks, acc)
		}),
		dtype.Q5_0: legacyDot(34, q5_0Units, func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32) {
			q50DotAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.F16Off], &x[0], chunks, acc)
		}),
		dtype.Q5_1: legacyDot(36, q5_1Units, func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32) {
			q51DotAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.F16Off], &row[l.F16Off+2*l.Blocks], &x[0], chunks, acc)
		}),
		dtype.Q8_0: legacyDot(34, q8_0Units, func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32) {
			q80DotAVX2(&row[l.Planes[0].Off], &row[l.F16Off], &x[0], chunks, acc)
		}),
		dtype.F32:  packedDotF32AVX2,
		dtype.F16:  packedDot16AVX2(dotF16AVX2, num.F16ToF32),
		dtype.BF16: packedDot16AVX2(dotBF16AVX2, num.BF16ToF32),
	}, "AVX2+FMA"
}

// vectorRows holds the rows forms (rows.go) by weight type (nil without the vector forms).
var vectorRows = rowsForms(vectorCPU)

// rowsForms returns the rows forms, or nil without the instructions they need (on).
func rowsForms(on bool) map[dtype.Type]rowsFunc {
	if !on {
		return nil
	}
	m := map[dtype.Type]rowsFunc{}
	for t, v := range rowsVariantsOf {
		if tileCPU {
			m[t] = rowsVNNI(t == dtype.Q6_K, v.vnni)
		} else {
			m[t] = v.avx2
		}
	}
	return m
}

// rowsVariantsOf holds the rows forms by weight type: AVX2 and AVX-512 VNNI.
var rowsVariantsOf = map[dtype.Type]struct {
	avx2 rowsFunc
	vnni func(w, x *byte, a *rowsArgs, out *float32)
}{
	dtype.Q4_K: {rowsQ4KAVX2, q4KRowsVNNI},
	dtype.Q6_K: {rowsAVX2(q6KRowsAVX2), q6KRowsVNNI},
}

// rowsISA names the instruction set of the rows forms in use.
func rowsISA() string {
	if tileCPU {
		return "AVX-512 VNNI"
	}
	return "AVX2"
}

// rowsVariants returns every rows form of t the CPU runs, by instruction set (tests).
func rowsVariants(t dtype.Type) map[string]rowsFunc {
	v, ok := rowsVariantsOf[t]
	if !vectorCPU || !ok {
		return nil
	}
	m := map[string]rowsFunc{"AVX2": v.avx2}
	if tileCPU {
		m["AVX-512 VNNI"] = rowsVNNI(t == dtype.Q6_K, v.vnni)
	}
	return m
}

// rowsAVX2 wraps a K-quant rows form with AVX2: bounds.
func rowsAVX2(run func(w, x *byte, a *rowsArgs, out *float32)) rowsFunc {
	return func(l *repack.Layout, w, x []byte, out []float32, pf bool) {
		if len(out) > 0 {
			a := newRowsArgs(l, w, x, len(out), pf)
			run(&w[0], &x[0], &a, &out[0])
		}
	}
}

// q4KPrepBytes is the size of one super-block's activations prepared for q4KRowsAVX2
// (simd_amd64.s).
const q4KPrepBytes = 320

// rowsQ4KAVX2 is q4_K's rows form with AVX2: bounds, and the activations prepared once for
// all the rows (32-byte aligned).
func rowsQ4KAVX2(l *repack.Layout, w, x []byte, out []float32, pf bool) {
	if len(out) == 0 {
		return
	}
	a := newRowsArgs(l, w, x, len(out), pf)
	p, bp := rowsPrep(int(l.Blocks) * q4KPrepBytes)
	defer rowsPreps.Put(bp)
	prepQ4KRowsAVX2(&p[0], &x[0], int(l.Blocks))
	q4KRowsAVX2(&w[0], &p[0], &a, &out[0])
}

// rowsArgs is the rows forms' description of a run of rows (offsets read by simd_amd64.s).
type rowsArgs struct {
	stride, low, high, scale, f16, blocks, rows, pfrows, ahead, pfl int64
}

// rowsAhead is how far ahead of the row it computes a rows form asks the caches for bytes: this
// many bytes or more, in whole rows.
const rowsAhead = 4096

// newRowsArgs describes n rows of a K-quant matrix and checks that w and x hold what the
// assembly reads (it has no bounds checks). With pf, rows whose row ahead lies within w
// prefetch it, spread over their super-blocks.
func newRowsArgs(l *repack.Layout, w, x []byte, n int, pf bool) rowsArgs {
	if n < 1 || l.Blocks < 1 {
		panic("kernels: bad rows shape")
	}
	stride := l.RowStride
	_, _ = w[:int64(n)*stride], x[:l.Blocks*q8KBytes]
	a := rowsArgs{stride: stride, low: l.Planes[0].Off, scale: l.ScaleOff, f16: l.F16Off, blocks: l.Blocks, rows: int64(n)}
	if len(l.Planes) > 1 {
		a.high = l.Planes[1].Off
	}
	if pf && rowsPrefetch {
		ahead := (rowsAhead + stride - 1) / stride
		a.ahead = ahead * stride
		a.pfrows = min(int64(n), max(0, int64(len(w))/stride-ahead))
		a.pfl = (stride/64 + l.Blocks - 1) / l.Blocks
	}
	return a
}

// vectorWarpTotal is num.WarpTotal with vector adds (the same pairs, the same bits).
func vectorWarpTotal(v *[32]float32) float32 { return num.Canon(warpTotalAVX(v)) }

// checkRow panics, as a slice expression would, unless row and x hold a whole packed row and
// its q8_K activations: the assembly reads them without bounds checks.
func checkRow(l *repack.Layout, row, x []byte) {
	_, _ = row[:l.RowStride], x[:l.Blocks*q8KBytes]
}

// kquantDot wraps a K-quant routine (whole super-blocks): bounds, the lane accumulators, the
// lane sum.
func kquantDot(run func(l *repack.Layout, row, x []byte, acc *[32]float32)) dotFunc {
	return func(l *repack.Layout, row, x []byte) float32 {
		checkRow(l, row, x)
		var acc [32]float32
		if l.Blocks > 0 {
			run(l, row, x, &acc)
		}
		return laneSum(&acc)
	}
}

// legacyDot wraps a legacy-format routine: whole chunks of 8 units (activation blocks of xb
// bytes) in the vector code, the remaining units with the format's Go step.
func legacyDot(xb int, tail unitsFunc,
	run func(l *repack.Layout, row, x []byte, chunks int, acc *[32]float32)) dotFunc {
	return func(l *repack.Layout, row, x []byte) float32 {
		units := int(l.Units)
		_, _ = row[:l.RowStride], x[:xb*units]
		chunks := units / 8
		var acc [32]float32
		if chunks > 0 {
			run(l, row, x, chunks, &acc)
		}
		tail(&acc, l, row, x, 8*chunks, units)
		return laneSum(&acc)
	}
}

// chunkOrder is the lane order of the float formats' vector accumulators: accumulator k of
// a chunk of eight lanes holds lane chunkOrder[k] (simd_amd64.s).
var chunkOrder = [8]int{0, 2, 4, 6, 1, 3, 5, 7}

// unchunk puts the float formats' accumulators back in lane order.
func unchunk(v *[32]float32) (acc [32]float32) {
	for c := 0; c < 32; c += 8 {
		for k, l := range chunkOrder {
			acc[c+l] = v[c+k]
		}
	}
	return acc
}

// packedDotF32AVX2 folds whole chunks of 8 units (32 values) with the vector code and the
// remaining units with the Go step.
func packedDotF32AVX2(l *repack.Layout, row, x []byte) float32 {
	cols := int(l.RowValues)
	w, v := device.AsF32(row[:4*cols]), device.AsF32(x[:4*cols])
	chunks := cols / 32
	var vacc [32]float32
	if chunks > 0 {
		dotF32AVX2(&w[0], &v[0], chunks, &vacc)
	}
	acc := unchunk(&vacc)
	dotF32Units(&acc, w, v, 8*chunks, cols/4)
	return laneSum(&acc)
}

// packedDot16AVX2 is packedDotF32AVX2 for 16-bit floats: chunks of 8 units (64 values).
func packedDot16AVX2(vec func(w, x *byte, chunks int, acc *[32]float32), dec func(uint16) float32) dotFunc {
	return func(l *repack.Layout, row, x []byte) float32 {
		cols := int(l.RowValues)
		row, x = row[:2*cols], x[:2*cols]
		chunks := cols / 64
		var vacc [32]float32
		if chunks > 0 {
			vec(&row[0], &x[0], chunks, &vacc)
		}
		acc := unchunk(&vacc)
		dot16Units(&acc, row, x, 8*chunks, cols/8, dec)
		return laneSum(&acc)
	}
}

// inRange reports whether every head vector c[o : o+hd] of offs lies inside c.
func inRange(c []float32, offs []int64, hd int) bool {
	for _, o := range offs {
		if o < 0 || o+int64(hd) > int64(len(c)) {
			return false
		}
	}
	return true
}

// vectorScores computes attendHead's scores e[j] for the keys, 8 at a time, and returns how
// many it computed (0 without the vector forms, with vec false, or for a head size not a
// multiple of 8). A last group of fewer than 8 keys is padded with copies of its last key into
// scratch, so every key's score is the same chain of operations. A NaN score may keep a payload
// the Go form would not give it: scores only reach the output through Max32 and Exp32, which
// give the canonical NaN.
func vectorScores(e, q, kc []float32, offs []int64, scale float32, vec bool) int {
	hd, n := len(q), len(offs)
	groups := n / 8
	if !vec || !vectorCPU || hd == 0 || hd%8 != 0 || n == 0 || !inRange(kc, offs, hd) {
		return 0
	}
	_ = e[n-1]
	if groups > 0 {
		attnScoresAVX2(&e[0], &q[0], &kc[0], &offs[0], groups, hd, scale)
	}
	if tail := n - 8*groups; tail > 0 {
		var te [8]float32
		to := padKeys(offs[8*groups:])
		attnScoresAVX2(&te[0], &q[0], &kc[0], &to[0], 1, hd, scale)
		copy(e[8*groups:n], te[:tail])
	}
	return n
}

// padKeys returns a last group of fewer than 8 key offsets padded to 8 with copies of its last
// one, for the vector score forms (whose padded scores are dropped).
func padKeys(tail []int64) [8]int64 {
	var to [8]int64
	copy(to[:], tail)
	for i := len(tail); i < 8; i++ {
		to[i] = tail[len(tail)-1]
	}
	return to
}

// vectorScores4 is vectorScores for four query heads that share their keys: head h's query
// is q[h·hd:(h+1)·hd] and its scores go to e[h·AttnChunk:]. It returns how many keys it scored: all of
// them, or 0 where vectorScores would.
func vectorScores4(e *[4 * AttnChunk]float32, q, kc []float32, offs []int64, scale float32) int {
	n := len(offs)
	hd := len(q) / 4
	groups := n / 8
	if !vectorCPU || hd == 0 || hd%8 != 0 || len(q) != 4*hd || n == 0 || n > AttnChunk || !inRange(kc, offs, hd) {
		return 0
	}
	if groups > 0 {
		attnScores4AVX2(&e[0], AttnChunk, &q[0], hd, &kc[0], &offs[0], groups, hd, scale)
	}
	if tail := n - 8*groups; tail > 0 {
		var te [4][8]float32
		to := padKeys(offs[8*groups:])
		attnScores4AVX2(&te[0][0], 8, &q[0], hd, &kc[0], &to[0], 1, hd, scale)
		for h := range te {
			copy(e[h*AttnChunk+8*groups:h*AttnChunk+n], te[h][:tail])
		}
	}
	return n
}

// vectorPV computes attendHead's weighted value sum out[d] = Σ_j e[j]·v_j[d] (before the
// division) and reports whether it did (head sizes a multiple of 32).
func vectorPV(out, e, vc []float32, offs []int64, vec bool) bool {
	hd := len(out)
	if !vec || !vectorCPU || hd == 0 || hd%32 != 0 || len(offs) == 0 || !inRange(vc, offs, hd) {
		return false
	}
	_ = e[len(offs)-1]
	for d := 0; d < hd; d += 32 {
		attnPV32AVX2(&out[d], &e[0], &vc[d], &offs[0], len(offs))
	}
	return true
}

// vectorPV2 is vectorPV for two heads that share their values: head h's sums go to
// out[h·os:][:hd] and its weights are e[h·es:][:len(offs)].
func vectorPV2(out []float32, os, hd int, e []float32, es int, vc []float32, offs []int64) bool {
	n := len(offs)
	if !vectorCPU || hd == 0 || hd%32 != 0 || os < hd || es < n || len(out) < os+hd || n == 0 || len(e) < es+n || !inRange(vc, offs, hd) {
		return false
	}
	for d := 0; d < hd; d += 32 {
		attnPV32x2AVX2(&out[d], os, &e[0], es, &vc[d], &offs[0], n)
	}
	return true
}

// vectorExpShift sets e[j] = num.Exp32(e[j] − m), 8 at a time (a last group of fewer than 8
// through scratch), and returns how many it set: all of them, or 0 without the vector forms.
func vectorExpShift(e []float32, m float32, vec bool) int {
	n := len(e) &^ 7
	if !vec || !vectorCPU || len(e) == 0 {
		return 0
	}
	if n > 0 {
		exp32ShiftAVX2(&e[0], n, m)
	}
	if tail := len(e) - n; tail > 0 {
		var t [8]float32
		copy(t[:], e[n:])
		exp32ShiftAVX2(&t[0], 8, m)
		copy(e[n:], t[:tail])
	}
	return len(e)
}

// vectorSwiGLU sets y[i] = Canon(SiLU32(a[i])·b[i]) for the first values, 8 at a time, and
// returns how many it set (0 without the vector forms).
func vectorSwiGLU(y, a, b []float32) int {
	n := min(len(y), len(a), len(b)) &^ 7
	if !vectorCPU || n == 0 {
		return 0
	}
	siluMulAVX2(&y[0], &a[0], &b[0], n)
	return n
}

// vectorSigmoidMul sets y[i] = Canon(a[i]·Sigmoid32(b[i])) for the first values, 8 at a time,
// and returns how many it set (0 without the vector forms).
func vectorSigmoidMul(y, a, b []float32) int {
	n := min(len(y), len(a), len(b)) &^ 7
	if !vectorCPU || n == 0 {
		return 0
	}
	sigmoidMulAVX2(&y[0], &a[0], &b[0], n)
	return n
}

// kMultiRun is a K-quant several-column routine: it adds a packed row's products with the
// n ≤ maxMultiColumns activation rows x[c·xb:] into their lane accumulators (column c at
// acc[32c:]).
type kMultiRun = func(l *repack.Layout, row, x []byte, xb, n int, acc *float32)

// multiRuns builds each type's several-column routine in each multiForm.
var multiRuns = map[dtype.Type]func(form multiForm) kMultiRun{dtype.Q4_K: runQ4K, dtype.Q5_K: runQ5K, dtype.Q6_K: runQ6K}

// multiForms builds each type's several-column form in each multiForm.
var multiForms = func() map[dtype.Type]func(form multiForm) multiDotFunc {
	m := map[dtype.Type]func(form multiForm) multiDotFunc{}
	for t, run := range multiRuns {
		m[t] = func(form multiForm) multiDotFunc { return multiK(run(form)) }
	}
	return m
}()

// runQ4K is q4_K's several-column routine.
func runQ4K(form multiForm) kMultiRun {
	return func(l *repack.Layout, row, x []byte, xb, n int, acc *float32) {
		q45KDotNAVX2(&row[l.Planes[0].Off], nil, &row[l.ScaleOff], &row[l.F16Off], &x[0], xb, n, int(l.Blocks), acc, form)
	}
}

// runQ5K is q5_K's several-column routine.
func runQ5K(form multiForm) kMultiRun {
	return func(l *repack.Layout, row, x []byte, xb, n int, acc *float32) {
		q45KDotNAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], xb, n, int(l.Blocks), acc, form)
	}
}

// runQ6K is q6_K's several-column routine.
func runQ6K(form multiForm) kMultiRun {
	return func(l *repack.Layout, row, x []byte, xb, n int, acc *float32) {
		q6KDotNAVX2(&row[l.Planes[0].Off], &row[l.Planes[1].Off], &row[l.ScaleOff], &row[l.F16Off], &x[0], xb, n, int(l.Blocks), acc, form)
	}
}

// multiK wraps a K-quant several-column routine: bounds, the lane accumulators, the lane sums.
func multiK(run kMultiRun) multiDotFunc {
	return func(l *repack.Layout, row, x []byte, xb int, out []float32) {
		n := len(out)
		if n > maxMultiColumns {
			panic("kernels: more columns than a several-column form takes")
		}
		var acc [maxMultiColumns][32]float32
		if l.Blocks > 0 && n > 0 {
			_, _ = row[:l.RowStride], x[:(n-1)*xb+int(l.Blocks)*q8KBytes]
			run(l, row, x, xb, n, &acc[0][0])
		}
		for c := range out {
			out[c] = laneSum(&acc[c])
		}
	}
}

// vectorMultiTInto holds, by weight type, the vectorMultiT forms that store their products
// straight into a matvec's output (multiIntoFunc).
var vectorMultiTInto = func() map[dtype.Type]multiIntoFunc {
	if vectorMultiT == nil {
		return nil
	}
	m := map[dtype.Type]multiIntoFunc{}
	for t := range vectorMultiT {
		m[t] = multiKInto(multiRuns[t](formTransposed))
	}
	return m
}()

// multiKInto wraps a K-quant several-column routine as a multiIntoFunc: bounds, then the
// lane sums folded, stored or added, and the accumulators zeroed in one pass
// (foldColumnsAVX2).
func multiKInto(run kMultiRun) multiIntoFunc {
	return func(l *repack.Layout, row, x []byte, xb, n int, acc *multiAcc, y []float32, stride int, add bool) {
		if n > maxIntoColumns {
			panic("kernels: more columns than a several-column form takes")
		}
		if n < 1 {
			return
		}
		_, _, _ = row[:l.RowStride], x[:(n-1)*xb+int(l.Blocks)*q8KBytes], y[(n-1)*stride]
		if l.Blocks > 0 {
			run(l, row, x, xb, n, &acc[0][0])
		}
		foldColumnsAVX2(&acc[0][0], n, &y[0], stride, add, l.Blocks == 1)
	}
}

// vectorDeltaRule runs deltaRule with the vector form and reports whether it did (head sizes
// a multiple of 8 on a CPU with the vector forms).
func vectorDeltaRule(o, s, q, k, v []float32, e, b float32) bool {
	d := len(q)
	if !vectorCPU || d == 0 || d%8 != 0 {
		return false
	}
	_, _, _, _ = o[d-1], s[d*d-1], k[d-1], v[d-1]
	deltaRuleAVX2(&o[0], &s[0], &q[0], &k[0], &v[0], d, e, b)
	return true
}
