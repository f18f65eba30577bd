package quant

import (
	"math"

	"verity/device/dtype"
)

// q4_K: super-blocks of 256 values in 8 groups of 32, x = d·sc_j·q − dmin·m_j with 4-bit
// q ∈ 0…15 and 6-bit sc_j, m_j. 144 bytes:
//
//	[0:2]    d, fp16 (scale of the 6-bit scales)
//	[2:4]    dmin, fp16 (scale of the 6-bit mins)
//	[4:16]   scales and mins, packed as scaleMinK4 describes
//	[16:144] qs: value 64c + l (c = 0…3, l = 0…31) is the low nibble of byte 32c + l,
//	         value 64c + 32 + l its high nibble
const (
	q4KBytes   = 144
	q4KD       = 0
	q4KDmin    = 2
	q4KScales  = 4
	q4KQs      = 16
	q4KGroup   = 32
	q4KNGroups = qkK / q4KGroup
)

type q4K struct{}

func init() { Register(q4K{}) }

func (q4K) Type() dtype.Type { return dtype.Q4_K }

// Dequantize is ggml's dequantize_row_q4_K: y = (d·sc)·q − dmin·m in float32, one rounding
// per operation.
func (q4K) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q4_K, len(values), len(blocks))
	for i := 0; i < len(values)/qkK; i++ {
		b := blocks[i*q4KBytes : (i+1)*q4KBytes]
		y := values[i*qkK : (i+1)*qkK]
		d, dmin := superScale(b[q4KD:]), superScale(b[q4KDmin:])
		for g := 0; g < q4KNGroups; g++ {
			sc, m := scaleMinK4(g, b[q4KScales:])
			dl, ml := d*float32(sc), dmin*float32(m)
			q := b[q4KQs+32*(g/2):]
			shift := uint(4 * (g % 2))
			yg := y[g*q4KGroup : (g+1)*q4KGroup]
			for l := range yg {
				yg[l] = float32(dl*float32(q[l]>>shift&0xf)) - ml
			}
		}
	}
}

// quantizeKXGroups runs ggml's per-group search of the q4_K/q5_K reference quantisers on the
// 8 groups of 32 values of x: weights av + |x_i| with av the group's RMS, a squared-error fit
// of scale and min by makeQKX2Quants. It fills the levels L and returns each group's scale and
// min, and their maxima.
func quantizeKXGroups(x []float32, nmax int32, rmin, rdelta float32, nstep int, L *[qkK]uint8, scales, mins *[8]float32) (maxScale, maxMin float32) {
	var (
		laux    [32]uint8
		weights [32]float32
	)
	for j := range 8 {
		xg := x[32*j : 32*(j+1)]
		var sumX2 float32
		for _, v := range xg {
			sumX2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xg {
			weights[l] = av + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xg, weights[:], L[32*j:], laux[:], rmin, rdelta, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	return maxScale, maxMin
}

// storeKXScales quantises the 8 scales and mins of a q4_K/q5_K block to 6 bits against their
// maxima (which map to 63), packs them into the 12 bytes sc and stores d = maxScale/63 and
// dmin = maxMin/63 at dd and dm, as ggml's reference quantisers do. It then re-quantises x
// with the stored (fp16-rounded) scales into levels 0…nmax; groups whose stored scale is 0
// keep their levels in L.
func storeKXScales(x []float32, nmax int32, sc, dd, dm []byte, maxScale, maxMin float32, scales, mins *[8]float32, L *[qkK]uint8) {
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [8]uint8
	for j := range 8 {
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
	}
	putScaleMinK4(sc, &ls, &lm)
	putSuperScale(dd, maxScale/63)
	putSuperScale(dm, maxMin/63)

	d, dmin := superScale(dd), superScale(dm)
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		dl := d * float32(s)
		if dl == 0 {
			continue
		}
		ml := float32(dmin * float32(m)) // exact anyway; the conversion keeps it unfused
		for l := 32 * j; l < 32*(j+1); l++ {
			L[l] = uint8(clampInt(nearestInt((x[l]+ml)/dl), 0, nmax))
		}
	}
}

// Quantize is ggml's quantize_row_q4_K_ref: per group a scale and min from makeQKX2Quants
// (21 candidate scales), both quantised to 6 bits, then the values re-quantised with the
// stored scales.
func (q4K) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q4_K, len(values), len(blocks))
	var (
		L            [qkK]uint8
		scales, mins [8]float32
	)
	for i := 0; i < len(values)/qkK; i++ {
		x := values[i*qkK : (i+1)*qkK]
		b := blocks[i*q4KBytes : (i+1)*q4KBytes]
		maxScale, maxMin := quantizeKXGroups(x, 15, -1, 0.1, 20, &L, &scales, &mins)
		storeKXScales(x, 15, b[q4KScales:q4KScales+12], b[q4KD:], b[q4KDmin:], maxScale, maxMin, &scales, &mins, &L)
		qs := b[q4KQs : q4KQs+qkK/2]
		for c := range 4 {
			for l := range 32 {
				qs[32*c+l] = L[64*c+l] | L[64*c+32+l]<<4
			}
		}
	}
}

// DotRef decodes each value as the exact float64 d·sc·q − dmin·m (the products are exact; the
// difference rounds once, if at all).
func (q4K) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q4_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qkK; i++ {
		b := blocks[i*q4KBytes : (i+1)*q4KBytes]
		xb := x[i*qkK : (i+1)*qkK]
		d, dmin := float64(superScale(b[q4KD:])), float64(superScale(b[q4KDmin:]))
		for g := 0; g < q4KNGroups; g++ {
			sc, m := scaleMinK4(g, b[q4KScales:])
			dl, ml := d*float64(sc), dmin*float64(m)
			q := b[q4KQs+32*(g/2):]
			shift := uint(4 * (g % 2))
			for l, xv := range xb[g*q4KGroup : (g+1)*q4KGroup] {
				v := float64(dl*float64(q[l]>>shift&0xf)) - ml
				sum += float64(v * xv)
			}
		}
	}
	return sum
}
