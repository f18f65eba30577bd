package quant

import "verity/device/dtype"

// q2_K: super-blocks of 256 values in 16 groups of 16, x = d·sc_j·q − dmin·m_j with 2-bit
// q ∈ 0…3 and 4-bit sc_j, m_j. 84 bytes:
//
//	[0:16]   scales: byte j = sc_j | m_j<<4 for group j (values 16j … 16j+15)
//	[16:80]  qs: value v = 128h + 32s + l (h = 0,1; s = 0…3; l = 0…31) is bits 2s…2s+1
//	         of byte 32h + l
//	[80:82]  d, fp16 (scale of the 4-bit scales)
//	[82:84]  dmin, fp16 (scale of the 4-bit mins)
const (
	q2KBytes   = 84
	q2KScales  = 0
	q2KQs      = 16
	q2KD       = 80
	q2KDmin    = 82
	q2KGroup   = 16
	q2KNGroups = qkK / q2KGroup
)

type q2K struct{}

func init() { Register(q2K{}) }

func (q2K) Type() dtype.Type { return dtype.Q2_K }

// Dequantize is ggml's dequantize_row_q2_K: y = (d·sc)·q − dmin·m in float32, one rounding
// per operation.
func (q2K) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q2_K, len(values), len(blocks))
	for i := 0; i < len(values)/qkK; i++ {
		b := blocks[i*q2KBytes : (i+1)*q2KBytes]
		y := values[i*qkK : (i+1)*qkK]
		d, dmin := superScale(b[q2KD:]), superScale(b[q2KDmin:])
		for g := 0; g < q2KNGroups; g++ {
			sc := b[q2KScales+g]
			dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
			q, shift := group2Bit(b[q2KQs:], g)
			yg := y[g*q2KGroup : (g+1)*q2KGroup]
			for l := range yg {
				yg[l] = float32(dl*float32(q[l]>>shift&3)) - ml
			}
		}
	}
}

// Quantize is ggml's quantize_row_q2_K_ref. Each group gets a scale and min from
// makeQKX2Quants (weights |x|, mean absolute error, 16 candidate scales); the scales and mins
// are quantised to 4 bits against the largest of each, and the values are re-quantised with
// the stored (fp16-rounded) scales. A group whose stored scale is 0 keeps the levels of the
// search.
func (q2K) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q2_K, len(values), len(blocks))
	var (
		L       [qkK]uint8
		laux    [q2KGroup]uint8
		weights [q2KGroup]float32
		scales  [q2KNGroups]float32
		mins    [q2KNGroups]float32
	)
	for i := 0; i < len(values)/qkK; i++ {
		x := values[i*qkK : (i+1)*qkK]
		b := blocks[i*q2KBytes : (i+1)*q2KBytes]
		var maxScale, maxMin float32
		for j := range q2KNGroups {
			xg := x[j*q2KGroup : (j+1)*q2KGroup]
			for l, v := range xg {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xg, weights[:], L[j*q2KGroup:], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}

		sc := b[q2KScales : q2KScales+q2KNGroups]
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range sc {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			putSuperScale(b[q2KD:], maxScale/15)
		} else {
			clear(sc)
			putSuperScale(b[q2KD:], 0)
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range sc {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			putSuperScale(b[q2KDmin:], maxMin/15)
		} else {
			putSuperScale(b[q2KDmin:], 0)
		}

		d, dmin := superScale(b[q2KD:]), superScale(b[q2KDmin:])
		for j := range q2KNGroups {
			dl := d * float32(sc[j]&0xf)
			if dl == 0 {
				continue
			}
			ml := float32(dmin * float32(sc[j]>>4)) // exact anyway; the conversion keeps it unfused
			for l := j * q2KGroup; l < (j+1)*q2KGroup; l++ {
				L[l] = uint8(clampInt(nearestInt((x[l]+ml)/dl), 0, 3))
			}
		}
		pack2Bit(b[q2KQs:q2KQs+qkK/4], &L)
	}
}

// DotRef decodes each value as the exact float64 d·sc·q − dmin·m (the products are exact; the
// difference rounds once, if at all).
func (q2K) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q2_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qkK; i++ {
		b := blocks[i*q2KBytes : (i+1)*q2KBytes]
		xb := x[i*qkK : (i+1)*qkK]
		d, dmin := float64(superScale(b[q2KD:])), float64(superScale(b[q2KDmin:]))
		for g := 0; g < q2KNGroups; g++ {
			sc := b[q2KScales+g]
			dl, ml := d*float64(sc&0xf), dmin*float64(sc>>4)
			q, shift := group2Bit(b[q2KQs:], g)
			for l, xv := range xb[g*q2KGroup : (g+1)*q2KGroup] {
				v := float64(dl*float64(q[l]>>shift&3)) - ml
				sum += float64(v * xv)
			}
		}
	}
	return sum
}
