package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestQ5_1MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q5_1) }

func TestQ5_1DequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q5_1)
	f, _ := Lookup(dtype.Q5_1)
	checkDequantAgainst(t, f, blocks, want)
}

// q51Block builds a block from the bits of d and m and the 32 levels q (0…31).
func q51Block(d, m uint16, q [32]uint8) []byte {
	b := make([]byte, q51BlockBytes)
	binary.LittleEndian.PutUint16(b, d)
	binary.LittleEndian.PutUint16(b[2:], m)
	var qh uint32
	for j := 0; j < 16; j++ {
		b[8+j] = q[j]&0xf | q[j+16]<<4
		qh |= uint32(q[j]>>4)<<j | uint32(q[j+16]>>4)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[4:], qh)
	return b
}

func TestQ5_1DequantizeDefinition(t *testing.T) {
	var ramp [32]uint8
	for j := range ramp {
		ramp[j] = uint8(31 - j)
	}
	for _, tc := range []struct {
		name string
		d, m uint16
	}{
		{"d=0.5/m=-1", hHalf, hMinus1},
		{"d=tiny/m=1", hTiny, hOne}, // ties such as 1 + 31·2⁻²⁴ go to even
		{"d=1+ulp/m=65504", hOnePlu, hMax},
		{"d=65504/m=-1", hMax, hMinus1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := q51Block(tc.d, tc.m, ramp)
			exact := make([]float64, 32)
			want := make([]float32, 32)
			for j := range want {
				exact[j] = float64(ramp[j])*halfValue[tc.d] + halfValue[tc.m] // one rounding below
				want[j] = float32(exact[j])
			}
			f, _ := Lookup(dtype.Q5_1)
			got := make([]float32, 32)
			f.Dequantize(got, b)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("value %d: %g (%#08x), want %g (%#08x)", j, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				}
			}
			x := randomX(uint64(tc.d)^uint64(tc.m), 32)
			if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
				t.Errorf("DotRef = %g, want %g", got, want)
			}
		})
	}
}

// TestQ5_1QuantizeDefinition checks blocks worked out by hand from quantize_row_q5_1_ref:
// m = min, d = (max − min)/31, q = trunc((x − min)/d + 0.5) (no clamp).
func TestQ5_1QuantizeDefinition(t *testing.T) {
	levels := func(f func(j int) uint8) (q [32]uint8) {
		for j := range q {
			q[j] = f(j)
		}
		return q
	}
	for _, tc := range []struct {
		name string
		x    func(j int) float32
		want []byte
	}{
		{"zeros", func(int) float32 { return 0 }, make([]byte, q51BlockBytes)},
		{
			// min 0, max 31: d = 1, q = trunc(x + 0.5)
			"0..31", func(j int) float32 { return float32(j) },
			q51Block(hOne, h0, levels(func(j int) uint8 { return uint8(j) })),
		},
		{
			// min −1, max 30, halves: d = 1, m = −1, (x + 1) + 0.5 truncated rounds halves up
			"halves", func(j int) float32 {
				if j == 31 {
					return 30
				}
				return float32(j)/2 - 1
			},
			q51Block(hOne, hMinus1, levels(func(j int) uint8 {
				if j == 31 {
					return 31
				}
				return uint8((j + 1) / 2)
			})),
		},
		{
			// 1/d overflows for this subnormal range; (x − min)·inf is +inf or NaN, which
			// cvttps2dq turns into INT32_MIN and the unsigned packs into 0 (see cvtUint8)
			"1/d-overflows", func(j int) float32 { return float32(j%2) * 1e-44 },
			append([]byte{0, 0, 0, 0}, make([]byte, 20)...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 32)
			for j := range x {
				x[j] = tc.x(j)
			}
			f, _ := Lookup(dtype.Q5_1)
			got := make([]byte, q51BlockBytes)
			f.Quantize(got, x)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got  %x\nwant %x", got, tc.want)
			}
		})
	}
}
