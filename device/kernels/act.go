package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"verity/device"
	"verity/device/num"
)

// ConvertArgs: Out[c] = convert(X[c]) for the N float32 rows of Cols values in X.
type ConvertArgs struct {
	X    device.Ptr // float32 [N][Cols]
	Out  device.Ptr // N rows of Act.RowBytes(Cols) bytes
	Cols int32
	N    int32
}

var convertKernels = map[Act]*device.Kernel[ConvertArgs]{}

// Convert returns the kernel converting float32 activation rows to format a (nil for ActF32,
// which matvecs read directly).
func Convert(a Act) *device.Kernel[ConvertArgs] { return convertKernels[a] }

func init() {
	for _, a := range []Act{ActF16, ActBF16, ActQ8_0, ActQ8_1, ActQ8_K} {
		a := a
		convertKernels[a] = device.Register(&device.Kernel[ConvertArgs]{
			EntryName:  "act_" + a.String(),
			ModuleName: "act",
			Shape: func(c ConvertArgs) (device.Geometry, error) {
				bv, _ := a.block()
				if c.Cols <= 0 || c.N <= 0 || int(c.Cols)%bv != 0 {
					return device.Geometry{}, fmt.Errorf("cannot convert %d rows of %d values to %s (blocks of %d)", c.N, c.Cols, a, bv)
				}
				// 256-thread blocks, one per 256 values of the whole batch (rounded up): a warp per
				// 32-value block, a whole thread block per 256-value q8_K block
				blocks := (int(c.Cols)*int(c.N) + 255) / 256
				return device.Geometry{Grid: device.Dim3{X: uint32(blocks), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
			},
			Twin: func(x *device.Exec, c ConvertArgs) error { return convertTwin(x, a, c) },
		})
	}
}

func convertTwin(x *device.Exec, a Act, c ConvertArgs) error {
	cols, n := int(c.Cols), int(c.N)
	in, err := x.F32(c.X, n*cols)
	if err != nil {
		return err
	}
	rb := a.RowBytes(cols)
	out, err := x.U8(c.Out, int64(n*rb))
	if err != nil {
		return err
	}
	x.For(n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			ConvertRow(a, out[r*rb:(r+1)*rb], in[r*cols:(r+1)*cols])
		}
	})
	return nil
}

// ConvertRow converts one row of float32 activations into format a (whose size is
// a.RowBytes(len(src))). The quantised formats are ggml's reference quantisers
// (quantize_row_q8_0_ref, _q8_1_ref, _q8_K_ref), value for value.
func ConvertRow(a Act, dst []byte, src []float32) {
	switch a {
	case ActF32:
		copy(dst, device.F32Bytes(src))
	case ActF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], num.F32ToF16(v))
		}
	case ActBF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], num.F32ToBF16(v))
		}
	case ActQ8_0:
		for b := 0; b < len(src)/32; b++ {
			q8Block(dst[b*34:(b+1)*34], src[b*32:(b+1)*32], false)
		}
	case ActQ8_1:
		for b := 0; b < len(src)/32; b++ {
			q8Block(dst[b*36:(b+1)*36], src[b*32:(b+1)*32], true)
		}
	case ActQ8_K:
		for b := 0; b < len(src)/256; b++ {
			if !vectorQ8KBlock(dst[b*292:(b+1)*292], src[b*256:(b+1)*256]) {
				q8KBlock(dst[b*292:(b+1)*292], src[b*256:(b+1)*256])
			}
		}
	}
}

// q8Block: d = amax/127, q = roundf(x·(1/d)) (halves away from zero), d stored as f16;
// with sum, also s = f16(d·Σq) (block_q8_1).
func q8Block(dst []byte, x []float32, sum bool) {
	var amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, num.F32ToF16(d))
	qs := dst[2:]
	if sum {
		qs = dst[4:]
	}
	s := int32(0)
	for j, v := range x {
		// A NaN product (a NaN input, or an infinite one: amax = Inf makes id = 0) gives
		// quant 0, as the GPU's conversion does and as ggml stores it on x86-64.
		var q int32
		if f := v * id; f == f {
			q = int32(math.Round(float64(f)))
		}
		qs[j] = byte(int8(q))
		s += q
	}
	if sum {
		binary.LittleEndian.PutUint16(dst[2:], num.F32ToF16(num.Canon(float32(s)*d)))
	}
}

// q8KBlock: the value of largest magnitude sets iscale = −127/max; q = nearest-even(iscale·x)
// capped at 127; d = 1/iscale (float32); plus the 16 sums of 16 quants.
func q8KBlock(dst []byte, x []float32) {
	var amax, max float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, max = a, v
		}
	}
	clear(dst)
	if amax == 0 {
		return
	}
	iscale := -127 / max
	qs := dst[4 : 4+256]
	for j, v := range x {
		// rounded before the add below (Go may not fuse them); a NaN product (an infinite
		// max makes iscale ±0) is the canonical NaN, whose low bits give the cap 127 as on the GPU
		f := num.Canon(float32(iscale * v))
		q := int32(math.Float32bits(f+12582912)&0x007fffff) - 0x00400000
		if q > 127 {
			q = 127
		}
		qs[j] = byte(int8(q))
	}
	for j := 0; j < 16; j++ {
		s := int32(0)
		for _, q := range qs[16*j : 16*j+16] {
			s += int32(int8(q))
		}
		binary.LittleEndian.PutUint16(dst[260+2*j:], uint16(int16(s)))
	}
	binary.LittleEndian.PutUint32(dst, math.Float32bits(1/iscale))
}
