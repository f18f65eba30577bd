package quant

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// This file holds what the K-quant formats (q2_K … q6_K) share: the super-block size, the fp16
// super-block scales, the 6-bit scale/min packing of q4_K and q5_K, and ggml's per-group
// searches for a scale (and min) that its reference quantisers run on every 16 or 32 values.
//
// The searches are ports of ggml-quants.c's make_qx_quants, make_q3_quants and
// make_qkx2_quants, operation for operation in float32: the same evaluation order, the same
// comparisons, nearestInt where ggml calls nearest_int. Every product that feeds a sum is
// wrapped in an explicit float32 conversion so that Go cannot fuse it into an FMA: ggml's C is
// built without contraction, and one fused rounding changes which candidate wins (the tests
// against ggml's output catch this with GOAMD64=v3).

// qkK is the number of values in a K-quant super-block.
const qkK = dtype.QK

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest |x| is below it is all zeros.
const groupMaxEps = float32(1e-15)

// superScale reads a little-endian fp16 scale (d or dmin of a super-block) from b[0:2].
func superScale(b []byte) float32 {
	return num.F16ToF32(binary.LittleEndian.Uint16(b))
}

// putSuperScale stores f as a little-endian fp16 in b[0:2], rounded to nearest even as
// ggml's GGML_FP32_TO_FP16 rounds.
func putSuperScale(b []byte, f float32) {
	binary.LittleEndian.PutUint16(b, num.F32ToF16(f))
}

// scaleMinK4 unpacks the 6-bit scale and min of group j (0..7) from the 12 scale bytes of a
// q4_K or q5_K block (ggml's get_scale_min_k4). Layout, with sc_j and m_j 6-bit:
//
//	bytes 0..3:  sc_0..sc_3 in bits 0-5; bits 6-7 hold bits 4-5 of sc_4..sc_7
//	bytes 4..7:  m_0..m_3   in bits 0-5; bits 6-7 hold bits 4-5 of m_4..m_7
//	bytes 8..11: low 4 bits of sc_4..sc_7 in bits 0-3, low 4 bits of m_4..m_7 in bits 4-7
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	sc = q[j+4]&0xf | (q[j-4]>>6)<<4
	m = q[j+4]>>4 | (q[j]>>6)<<4
	return sc, m
}

// putScaleMinK4 packs the 6-bit scales and mins of the 8 groups into 12 bytes, the inverse of
// scaleMinK4. Bits above the sixth are dropped.
func putScaleMinK4(q []byte, sc, m *[8]uint8) {
	for j := 0; j < 4; j++ {
		q[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		q[j+4] = m[j]&63 | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&0xf | (m[j+4]&0xf)<<4
	}
}

// group2Bit returns, for the 64 bytes of 2-bit fields of a q2_K or q3_K block (see pack2Bit),
// the 16 bytes holding group g (values 16g … 16g+15) and the shift of the group's bits.
func group2Bit(qs []byte, g int) ([]byte, uint) {
	h, s, half := g/8, g/2%4, g%2
	off := 32*h + 16*half
	return qs[off : off+16], uint(2 * s)
}

// pack2Bit stores the low 2 bits of 256 levels in 64 bytes, the q2_K/q3_K layout: level
// 128h + 32s + l goes to bits 2s…2s+1 of byte 32h + l.
func pack2Bit(qs []byte, L *[qkK]uint8) {
	for h := 0; h < 2; h++ {
		for l := 0; l < 32; l++ {
			v := L[128*h+l:]
			qs[32*h+l] = v[0] | v[32]<<2 | v[64]<<4 | v[96]<<6
		}
	}
}

// absMax returns the element of x with the largest magnitude (the first one on ties) and that
// magnitude, starting from 0 as ggml does (so NaNs are skipped).
func absMax(x []float32) (maxv, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	return maxv, amax
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func clampInt(l, lo, hi int32) int32 { return max(lo, min(hi, l)) }

// makeQXQuants is ggml's make_qx_quants for rmse_type 1 without importance weights (the case
// quantize_row_q6_K_ref uses): a signed scale for the group x with levels −nmax … nmax−1,
// weighted by x². It stores the levels, offset by nmax, in L and returns the scale.
//
// It starts from the scale that maps the largest |x| to −nmax, fits the least-squares scale
// for those levels, then tries the 18 scales −(nmax ± 0.1·k)/max (k = 1…9) and keeps any whose
// fitted levels reduce the weighted squared error (sumlx²/suml2 larger).
func makeQXQuants(nmax int32, x []float32, L []uint8) float32 {
	maxv, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fnmax := float32(nmax)
	iscale := float32(-nmax) / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = uint8(l + nmax)
		w := v * v
		fl := float32(l)
		sumlx += float32(w * v * fl)
		suml2 += float32(w * fl * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := int32(-9); is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / maxv
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
			w := v * v
			fl := float32(l)
			sumlx += float32(w * v * fl)
			suml2 += float32(w * fl * fl)
		}
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			for i, v := range x {
				L[i] = uint8(clampInt(nearestInt(iscale*v), -nmax, nmax-1) + nmax)
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse set (as quantize_row_q3_K_ref calls it):
// a signed scale for the group x with levels −nmax … nmax−1, weighted by x². Starting from the
// levels of the scale that maps the largest |x| to −nmax, it moves single levels to their
// least-squares optimum for up to 5 sweeps while that improves sumlx²/suml2. It stores the
// levels, offset by nmax, in L and returns the fitted scale. x holds at most 16 values.
func makeQ3Quants(nmax int32, x []float32, L []uint8) float32 {
	maxv, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / maxv
	var lv [16]int32
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		lv[i] = l
		w := v * v
		fl := float32(l)
		sumlx += float32(w * v * fl)
		suml2 += float32(w * fl * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := v * v
			li := float32(lv[i])
			slx := sumlx - float32(w*v*li)
			if slx > 0 {
				sl2 := suml2 - float32(w*li*li)
				nl := clampInt(nearestInt(v*sl2/slx), -nmax, nmax-1)
				if nl != lv[i] {
					fnl := float32(nl)
					slx += float32(w * v * fnl)
					sl2 += float32(w * fnl * fnl)
					if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
						lv[i], sumlx, suml2 = nl, slx, sl2
						changed = true
					}
				}
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] = uint8(lv[i] + nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQKX2Quants is ggml's make_qkx2_quants: a scale and a min for the group x with levels
// 0 … nmax, x ≈ scale·L − m, minimising Σ weights·|err| (useMAD) or Σ weights·err². It starts
// from the range [min(x, 0), max(x)], then tries the scales (rmin + rdelta·is + nmax)/range for
// is = 0 … nstep (none if nstep < 1): for each candidate's levels it fits scale and offset by
// weighted least squares (the offset kept ≤ 0, refitting the scale alone if it is not) and
// keeps the candidate of least error. laux is scratch of len(x). It returns the scale and
// m = −offset ≥ 0.
func makeQKX2Quants(nmax int32, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	minv, maxv := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		v := x[i]
		if v < minv {
			minv = v
		}
		if v > maxv {
			maxv = v
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * v)
	}
	if minv > 0 {
		minv = 0
	}
	if maxv == minv {
		clear(L[:n])
		return 0, -minv
	}
	fnmax := float32(nmax)
	iscale := fnmax / (maxv - minv)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*(v-minv)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + minv - v
		if useMAD {
			diff = abs32(diff)
		} else {
			diff = diff * diff
		}
		bestErr += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -minv
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fnmax) / (maxv - minv)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt(nearestInt(iscale*(v-minv)), 0, nmax)
			laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(w * fl * fl)
			sumXL += float32(w * fl * v)
		}
		det := float32(sumW*sumL2) - float32(sumL*sumL)
		if det > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / det
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / det
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i, v := range x {
				diff := float32(thisScale*float32(laux[i])) + thisMin - v
				if useMAD {
					diff = abs32(diff)
				} else {
					diff = diff * diff
				}
				curErr += float32(weights[i] * diff)
			}
			if curErr < bestErr {
				copy(L[:n], laux[:n])
				bestErr = curErr
				scale = thisScale
				minv = thisMin
			}
		}
	}
	return scale, -minv
}
