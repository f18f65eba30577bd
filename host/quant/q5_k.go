package quant

import "verity/device/dtype"

// q5_K: super-blocks of 256 values in 8 groups of 32, x = d·sc_j·q − dmin·m_j with 5-bit
// q ∈ 0…31 and 6-bit sc_j, m_j. 176 bytes:
//
//	[0:2]    d, fp16 (scale of the 6-bit scales)
//	[2:4]    dmin, fp16 (scale of the 6-bit mins)
//	[4:16]   scales and mins, packed as scaleMinK4 describes
//	[16:48]  qh: bit 4 of q for value 64c + l (c = 0…3, l = 0…31) is bit 2c of byte l,
//	         for value 64c + 32 + l bit 2c+1
//	[48:176] qs: bits 0-3 of q, laid out as q4_K's qs (value 64c + l in the low nibble of
//	         byte 32c + l, value 64c + 32 + l in its high nibble)
const (
	q5KBytes   = 176
	q5KD       = 0
	q5KDmin    = 2
	q5KScales  = 4
	q5KQh      = 16
	q5KQs      = 48
	q5KGroup   = 32
	q5KNGroups = qkK / q5KGroup
)

type q5K struct{}

func init() { Register(q5K{}) }

func (q5K) Type() dtype.Type { return dtype.Q5_K }

// q5KLevel is the level 0…31 of value l of group g from its nibble and its qh bit.
func q5KLevel(b []byte, g, l int) uint8 {
	q := b[q5KQs+32*(g/2)+l] >> (4 * (g % 2)) & 0xf
	h := b[q5KQh+l] >> g & 1
	return q | h<<4
}

// Dequantize is ggml's dequantize_row_q5_K: y = (d·sc)·q − dmin·m in float32, one rounding
// per operation.
func (q5K) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q5_K, len(values), len(blocks))
	for i := 0; i < len(values)/qkK; i++ {
		b := blocks[i*q5KBytes : (i+1)*q5KBytes]
		y := values[i*qkK : (i+1)*qkK]
		d, dmin := superScale(b[q5KD:]), superScale(b[q5KDmin:])
		qh := b[q5KQh : q5KQh+32]
		for c := range 4 {
			sc1, m1 := scaleMinK4(2*c, b[q5KScales:])
			sc2, m2 := scaleMinK4(2*c+1, b[q5KScales:])
			d1, mn1 := d*float32(sc1), dmin*float32(m1)
			d2, mn2 := d*float32(sc2), dmin*float32(m2)
			qs := b[q5KQs+32*c : q5KQs+32*c+32]
			y1, y2 := y[64*c:64*c+32], y[64*c+32:64*c+64]
			for l := range 32 {
				y1[l] = float32(d1*float32(qs[l]&0xf|(qh[l]>>(2*c)&1)<<4)) - mn1
				y2[l] = float32(d2*float32(qs[l]>>4|(qh[l]>>(2*c+1)&1)<<4)) - mn2
			}
		}
	}
}

// Quantize is ggml's quantize_row_q5_K_ref: per group a scale and min from makeQKX2Quants
// (16 candidate scales), both quantised to 6 bits, then the values re-quantised with the
// stored scales.
func (q5K) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q5_K, len(values), len(blocks))
	var (
		L            [qkK]uint8
		scales, mins [8]float32
	)
	for i := 0; i < len(values)/qkK; i++ {
		x := values[i*qkK : (i+1)*qkK]
		b := blocks[i*q5KBytes : (i+1)*q5KBytes]
		maxScale, maxMin := quantizeKXGroups(x, 31, -0.5, 0.1, 15, &L, &scales, &mins)
		storeKXScales(x, 31, b[q5KScales:q5KScales+12], b[q5KD:], b[q5KDmin:], maxScale, maxMin, &scales, &mins, &L)
		qh := b[q5KQh : q5KQh+32]
		qs := b[q5KQs : q5KQs+qkK/2]
		clear(qh)
		for c := range 4 {
			for l := range 32 {
				lo, hi := L[64*c+l], L[64*c+32+l]
				qs[32*c+l] = lo&0xf | (hi&0xf)<<4
				qh[l] |= (lo>>4)<<(2*c) | (hi>>4)<<(2*c+1)
			}
		}
	}
}

// DotRef decodes each value as the exact float64 d·sc·q − dmin·m (the products are exact; the
// difference rounds once, if at all).
func (q5K) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q5_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qkK; i++ {
		b := blocks[i*q5KBytes : (i+1)*q5KBytes]
		xb := x[i*qkK : (i+1)*qkK]
		d, dmin := float64(superScale(b[q5KD:])), float64(superScale(b[q5KDmin:]))
		for g := 0; g < q5KNGroups; g++ {
			sc, m := scaleMinK4(g, b[q5KScales:])
			dl, ml := d*float64(sc), dmin*float64(m)
			for l, xv := range xb[g*q5KGroup : (g+1)*q5KGroup] {
				v := float64(dl*float64(q5KLevel(b, g, l))) - ml
				sum += float64(v * xv)
			}
		}
	}
	return sum
}
