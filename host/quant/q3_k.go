package quant

import "verity/device/dtype"

// q3_K: super-blocks of 256 values in 16 groups of 16, x = d·(sc_j − 32)·(q − 4) with 3-bit
// q ∈ 0…7 and 6-bit sc_j. 110 bytes:
//
//	[0:32]    hmask: bit 2 of q for value v is bit v/32 of byte v%32
//	[32:96]   qs: bits 0-1 of q, laid out as q2_K's qs (value 128h + 32s + l is bits
//	          2s…2s+1 of byte 32h + l)
//	[96:108]  scales: sc_j's low 4 bits are bits 0-3 of byte j (j < 8) or bits 4-7 of byte j−8
//	          (j ≥ 8); its high 2 bits are bits 2(j/4)…2(j/4)+1 of byte 8 + j%4
//	[108:110] d, fp16
const (
	q3KBytes   = 110
	q3KHmask   = 0
	q3KQs      = 32
	q3KScales  = 96
	q3KD       = 108
	q3KGroup   = 16
	q3KNGroups = qkK / q3KGroup
)

type q3K struct{}

func init() { Register(q3K{}) }

func (q3K) Type() dtype.Type { return dtype.Q3_K }

// q3KScale unpacks the 6-bit scale of group j from the 12 scale bytes, minus its offset 32.
func q3KScale(sc []byte, j int) int8 {
	var lo uint8
	if j < 8 {
		lo = sc[j] & 0xf
	} else {
		lo = sc[j-8] >> 4
	}
	hi := sc[8+j%4] >> (2 * (j / 4)) & 3
	return int8(lo|hi<<4) - 32
}

// Dequantize is ggml's dequantize_row_q3_K: y = (d·sc)·q in float32, q ∈ −4…3.
func (q3K) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q3_K, len(values), len(blocks))
	for i := 0; i < len(values)/qkK; i++ {
		b := blocks[i*q3KBytes : (i+1)*q3KBytes]
		y := values[i*qkK : (i+1)*qkK]
		d := superScale(b[q3KD:])
		hmask := b[q3KHmask : q3KHmask+32]
		for g := 0; g < q3KNGroups; g++ {
			dl := d * float32(q3KScale(b[q3KScales:], g))
			q, shift := group2Bit(b[q3KQs:], g)
			hm := hmask[g%2*16:]
			bit := uint8(1) << (g / 2)
			yg := y[g*q3KGroup : (g+1)*q3KGroup]
			for l := range yg {
				yg[l] = dl * float32(q3KLevel(q[l], shift, hm[l], bit))
			}
		}
	}
}

// q3KLevel is the signed level −4…3 of a q3_K value from its 2-bit field and its hmask bit.
func q3KLevel(q byte, shift uint, hm, bit uint8) int32 {
	l := int32(q >> shift & 3)
	if hm&bit == 0 {
		l -= 4
	}
	return l
}

// Quantize is ggml's quantize_row_q3_K_ref. Each group gets a signed scale from makeQ3Quants;
// the scales are quantised to 6 bits against the one of largest magnitude (which maps to −32),
// and the values are re-quantised with the stored (fp16-rounded) scales. A group whose stored
// scale is 0 keeps the levels of the search.
func (q3K) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q3_K, len(values), len(blocks))
	var (
		L      [qkK]uint8
		scales [q3KNGroups]float32
	)
	for i := 0; i < len(values)/qkK; i++ {
		x := values[i*qkK : (i+1)*qkK]
		b := blocks[i*q3KBytes : (i+1)*q3KBytes]
		var maxScale, amax float32
		for j := range q3KNGroups {
			scales[j] = makeQ3Quants(4, x[j*q3KGroup:(j+1)*q3KGroup], L[j*q3KGroup:])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}

		sc := b[q3KScales : q3KScales+12]
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range q3KNGroups {
				l := int8(nearestInt(iscale * scales[j]))
				l = int8(clampInt(int32(l), -32, 31) + 32)
				if j < 8 {
					sc[j] = uint8(l) & 0xf
				} else {
					sc[j-8] |= (uint8(l) & 0xf) << 4
				}
				sc[8+j%4] |= uint8(l>>4) << (2 * (j / 4))
			}
			putSuperScale(b[q3KD:], 1/iscale)
		} else {
			putSuperScale(b[q3KD:], 0)
		}

		d := superScale(b[q3KD:])
		for j := range q3KNGroups {
			dl := d * float32(q3KScale(sc, j))
			if dl == 0 {
				continue
			}
			for l := j * q3KGroup; l < (j+1)*q3KGroup; l++ {
				L[l] = uint8(clampInt(nearestInt(x[l]/dl), -4, 3) + 4)
			}
		}

		hmask := b[q3KHmask : q3KHmask+32]
		clear(hmask)
		for j := range L {
			if L[j] > 3 {
				hmask[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
		}
		pack2Bit(b[q3KQs:q3KQs+qkK/4], &L)
	}
}

// DotRef decodes each value as the exact float64 d·sc·q.
func (q3K) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q3_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qkK; i++ {
		b := blocks[i*q3KBytes : (i+1)*q3KBytes]
		xb := x[i*qkK : (i+1)*qkK]
		d := float64(superScale(b[q3KD:]))
		hmask := b[q3KHmask : q3KHmask+32]
		for g := 0; g < q3KNGroups; g++ {
			dl := d * float64(q3KScale(b[q3KScales:], g))
			q, shift := group2Bit(b[q3KQs:], g)
			hm := hmask[g%2*16:]
			bit := uint8(1) << (g / 2)
			for l, xv := range xb[g*q3KGroup : (g+1)*q3KGroup] {
				v := dl * float64(q3KLevel(q[l], shift, hm[l], bit))
				sum += float64(v * xv)
			}
		}
	}
	return sum
}
