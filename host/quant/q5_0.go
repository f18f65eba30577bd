package quant

import (
	"encoding/binary"

	"verity/device/dtype"
)

// Q5_0: blocks of 32 values, 22 bytes, value = (q − 16)·d with q ∈ 0…31.
//
//	offset 0:  d      fp16, little-endian
//	offset 2:  qh     uint32, little-endian: bit j is bit 4 of q_j
//	offset 6:  qs[16] byte j holds the low 4 bits of q_j (low nibble) and of q_{j+16} (high)
//
// The reference quantiser (quantize_row_q5_0_ref) takes the element of largest magnitude, max
// (the first one on ties), sets d = max/−16 and q = min(31, trunc(x·(1/d) + 16.5)).
const (
	qk50          = 32
	q50BlockBytes = 6 + qk50/2
)

type q50Format struct{}

func init() {
	checkLegacyLayout(dtype.Q5_0, qk50, q50BlockBytes)
	Register(q50Format{})
}

func (q50Format) Type() dtype.Type { return dtype.Q5_0 }

func (q50Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q5_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk50; i++ {
		b := blocks[i*q50BlockBytes : (i+1)*q50BlockBytes]
		y := values[i*qk50 : (i+1)*qk50]
		d := loadHalf(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		for j, q := range b[6:q50BlockBytes] {
			q0 := int32(q&0xf) | int32(qh>>j&1)<<4
			q1 := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			y[j] = float32(q0-16) * d
			y[j+qk50/2] = float32(q1-16) * d
		}
	}
}

func (q50Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q5_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk50; i++ {
		x := values[i*qk50 : (i+1)*qk50]
		b := blocks[i*q50BlockBytes : (i+1)*q50BlockBytes]
		var amax, maxv float32
		for _, v := range x {
			if a := fabs32(v); amax < a {
				amax, maxv = a, v
			}
		}
		d := maxv / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeHalf(b, d)
		var qh uint32
		for j := 0; j < qk50/2; j++ {
			q0 := uint8(min(31, cvtInt8(float32(x[j]*id)+16.5)))
			q1 := uint8(min(31, cvtInt8(float32(x[j+qk50/2]*id)+16.5)))
			b[6+j] = q0&0xf | q1<<4
			qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

func (q50Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q5_0, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk50; i++ {
		b := blocks[i*q50BlockBytes : (i+1)*q50BlockBytes]
		xb := x[i*qk50 : (i+1)*qk50]
		d := float64(loadHalf(b))
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < qk50; j++ {
			q := int32(nibble(b[6:], j)) | int32(qh>>j&1)<<4
			sum += float64(float64(q-16) * d * xb[j])
		}
	}
	return sum
}
