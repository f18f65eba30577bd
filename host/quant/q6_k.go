package quant

import "verity/device/dtype"

// q6_K: super-blocks of 256 values in 16 groups of 16, x = d·sc_j·(q − 32) with 6-bit
// q ∈ 0…63 and signed 8-bit sc_j. 210 bytes:
//
//	[0:128]   ql: bits 0-3 of q. For value 128h + 32k + l (h = 0,1; k = 0…3; l = 0…31):
//	          byte 64h + 32(k%2) + l, low nibble for k < 2, high nibble for k ≥ 2
//	[128:192] qh: bits 4-5 of q, bits 2k…2k+1 of byte 128 + 32h + l
//	[192:208] scales: sc_j, int8, for group j (values 16j … 16j+15)
//	[208:210] d, fp16
const (
	q6KBytes   = 210
	q6KQl      = 0
	q6KQh      = 128
	q6KScales  = 192
	q6KD       = 208
	q6KGroup   = 16
	q6KNGroups = qkK / q6KGroup
)

type q6K struct{}

func init() { Register(q6K{}) }

func (q6K) Type() dtype.Type { return dtype.Q6_K }

// q6KLevel is the signed level −32…31 of value v (0…255) of a q6_K block.
func q6KLevel(b []byte, v int) int32 {
	h, k, l := v/128, v/32%4, v%32
	lo := b[q6KQl+64*h+32*(k%2)+l] >> (4 * (k / 2)) & 0xf
	hi := b[q6KQh+32*h+l] >> (2 * k) & 3
	return int32(lo|hi<<4) - 32
}

// Dequantize is ggml's dequantize_row_q6_K: y = (d·sc)·q in float32.
func (q6K) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q6_K, len(values), len(blocks))
	for i := 0; i < len(values)/qkK; i++ {
		b := blocks[i*q6KBytes : (i+1)*q6KBytes]
		y := values[i*qkK : (i+1)*qkK]
		d := superScale(b[q6KD:])
		for h := range 2 {
			ql := b[q6KQl+64*h : q6KQl+64*h+64]
			qh := b[q6KQh+32*h : q6KQh+32*h+32]
			sc := b[q6KScales+8*h : q6KScales+8*h+8]
			yh := y[128*h : 128*h+128]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6)<<4) - 32
				yh[l] = d * float32(int8(sc[is])) * float32(q1)
				yh[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				yh[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				yh[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

// Quantize is ggml's quantize_row_q6_K_ref. Each group gets a signed scale from makeQXQuants;
// the scales are quantised to 8 bits against the one of largest magnitude (which maps to
// −128, clamped to 127), and the values are re-quantised with the stored (fp16-rounded)
// scales. A super-block whose largest |scale| is below 1e-15 is all zero bytes; a group whose
// stored scale is 0 keeps the levels of the search.
func (q6K) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q6_K, len(values), len(blocks))
	var (
		L      [qkK]uint8
		scales [q6KNGroups]float32
	)
	for i := 0; i < len(values)/qkK; i++ {
		x := values[i*qkK : (i+1)*qkK]
		b := blocks[i*q6KBytes : (i+1)*q6KBytes]
		var maxScale, maxAbs float32
		for j := range q6KNGroups {
			scales[j] = makeQXQuants(32, x[j*q6KGroup:(j+1)*q6KGroup], L[j*q6KGroup:])
			if a := abs32(scales[j]); a > maxAbs {
				maxAbs, maxScale = a, scales[j]
			}
		}
		if maxAbs < groupMaxEps {
			clear(b)
			continue
		}

		iscale := -128 / maxScale
		putSuperScale(b[q6KD:], 1/iscale)
		sc := b[q6KScales : q6KScales+q6KNGroups]
		for j := range sc {
			sc[j] = uint8(int8(min(127, nearestInt(iscale*scales[j]))))
		}

		d := superScale(b[q6KD:])
		for j := range q6KNGroups {
			dl := d * float32(int8(sc[j]))
			if dl == 0 {
				continue
			}
			for l := j * q6KGroup; l < (j+1)*q6KGroup; l++ {
				L[l] = uint8(clampInt(nearestInt(x[l]/dl), -32, 31) + 32)
			}
		}

		ql := b[q6KQl : q6KQl+128]
		qh := b[q6KQh : q6KQh+64]
		for h := range 2 {
			for l := range 32 {
				v := L[128*h+l:]
				ql[64*h+l] = v[0]&0xf | (v[64]&0xf)<<4
				ql[64*h+32+l] = v[32]&0xf | (v[96]&0xf)<<4
				qh[32*h+l] = v[0]>>4 | (v[32]>>4)<<2 | (v[64]>>4)<<4 | (v[96]>>4)<<6
			}
		}
	}
}

// DotRef decodes each value as the exact float64 d·sc·q.
func (q6K) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q6_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qkK; i++ {
		b := blocks[i*q6KBytes : (i+1)*q6KBytes]
		xb := x[i*qkK : (i+1)*qkK]
		d := float64(superScale(b[q6KD:]))
		for v, xv := range xb {
			dl := d * float64(int8(b[q6KScales+v/q6KGroup]))
			sum += float64(dl * float64(q6KLevel(b, v)) * xv)
		}
	}
	return sum
}
