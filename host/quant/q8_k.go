package quant

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
)

// Q8_K: blocks of 256 values, 292 bytes, value = q·d. It is not a file type: it is the form
// ggml converts activations to before a dot product with K-quant weights.
//
//	offset 0:   d         float32, little-endian
//	offset 4:   qs[256]   int8
//	offset 260: bsums[16] int16, little-endian: bsums[k] = Σ qs[16k … 16k+15]
//
// The reference quantiser (quantize_row_q8_K_ref) takes the element of largest magnitude, max
// (the first one on ties), sets iscale = −127/max, q = min(127, nearest_int(iscale·x)) (ties to
// even, so q ∈ −127…127) and stores d = 1/iscale. A block of zeros stores d = 0 and q = 0; ggml
// leaves its bsums untouched there, this package writes zeros.
const (
	qk8K          = 256
	q8KBlockBytes = 4 + qk8K + 2*qk8K/16
)

type q8KFormat struct{}

func init() {
	checkLegacyLayout(dtype.Q8_K, qk8K, q8KBlockBytes)
	Register(q8KFormat{})
}

func (q8KFormat) Type() dtype.Type { return dtype.Q8_K }

func (q8KFormat) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q8_K, len(values), len(blocks))
	for i := 0; i < len(values)/qk8K; i++ {
		b := blocks[i*q8KBlockBytes : (i+1)*q8KBlockBytes]
		y := values[i*qk8K : (i+1)*qk8K]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for j, q := range b[4 : 4+qk8K] {
			y[j] = d * float32(int8(q))
		}
	}
}

func (q8KFormat) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q8_K, len(values), len(blocks))
	for i := 0; i < len(values)/qk8K; i++ {
		x := values[i*qk8K : (i+1)*qk8K]
		b := blocks[i*q8KBlockBytes : (i+1)*q8KBlockBytes]
		var amax, maxv float32
		for _, v := range x {
			if a := fabs32(v); a > amax {
				amax, maxv = a, v
			}
		}
		if amax == 0 {
			clear(b)
			continue
		}
		iscale := -127 / maxv
		qs := b[4 : 4+qk8K]
		for j, v := range x {
			qs[j] = uint8(min(127, nearestInt(float32(iscale*v))))
		}
		for k := 0; k < qk8K/16; k++ {
			var s int32
			for _, q := range qs[16*k : 16*k+16] {
				s += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(b[4+qk8K+2*k:], uint16(s))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	}
}

func (q8KFormat) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q8_K, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk8K; i++ {
		b := blocks[i*q8KBlockBytes : (i+1)*q8KBlockBytes]
		xb := x[i*qk8K : (i+1)*qk8K]
		d := float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		for j, q := range b[4 : 4+qk8K] {
			sum += float64(float64(int8(q)) * d * xb[j])
		}
	}
	return sum
}
