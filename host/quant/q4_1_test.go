package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestQ4_1MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q4_1) }

func TestQ4_1DequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q4_1)
	f, _ := Lookup(dtype.Q4_1)
	checkDequantAgainst(t, f, blocks, want)
}

// q41Block builds a block from the bits of d and m and the 32 levels q (0…15).
func q41Block(d, m uint16, q [32]uint8) []byte {
	b := make([]byte, q41BlockBytes)
	binary.LittleEndian.PutUint16(b, d)
	binary.LittleEndian.PutUint16(b[2:], m)
	for j := 0; j < 16; j++ {
		b[4+j] = q[j] | q[j+16]<<4
	}
	return b
}

func TestQ4_1DequantizeDefinition(t *testing.T) {
	var ramp [32]uint8
	for j := range ramp {
		ramp[j] = uint8(j % 16)
	}
	for _, tc := range []struct {
		name string
		d, m uint16
	}{
		{"d=0.5/m=-1", hHalf, hMinus1},
		{"d=1/m=0", hOne, h0},
		// q·2⁻²⁴ + 1 must round once, to float32: 1 + 15·2⁻²⁴ is a tie and goes to even
		{"d=tiny/m=1", hTiny, hOne},
		// 15·(1+2⁻¹⁰) + 65504 = 65519.0146… rounds to 65519.015625
		{"d=1+ulp/m=65504", hOnePlu, hMax},
		{"d=65504/m=65504", hMax, hMax},
		{"d=-0/m=-0", hNeg0, hNeg0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := q41Block(tc.d, tc.m, ramp)
			exact := make([]float64, 32)
			want := make([]float32, 32)
			for j := range want {
				// q·d is exact in float32 (an fp16 times 4 bits), and the float64 sum of it and
				// m is exact too, so converting that sum rounds once, as ggml's float add does.
				exact[j] = float64(ramp[j])*halfValue[tc.d] + halfValue[tc.m]
				want[j] = float32(exact[j])
			}
			f, _ := Lookup(dtype.Q4_1)
			got := make([]float32, 32)
			f.Dequantize(got, b)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("value %d: %g (%#08x), want %g (%#08x)", j, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
				}
			}
			x := randomX(uint64(tc.d)+uint64(tc.m), 32)
			if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
				t.Errorf("DotRef = %g, want %g", got, want)
			}
		})
	}
}

// TestQ4_1QuantizeDefinition checks blocks worked out by hand from quantize_row_q4_1_ref:
// m = min, d = (max − min)/15, q = min(15, trunc((x − min)/d + 0.5)).
func TestQ4_1QuantizeDefinition(t *testing.T) {
	levels := func(f func(j int) uint8) (q [32]uint8) {
		for j := range q {
			q[j] = f(j)
		}
		return q
	}
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		x    func(j int) float32
		want []byte
	}{
		{"zeros", func(int) float32 { return 0 }, make([]byte, q41BlockBytes)},
		{
			// max == min: d = 0, id = 0, every q = trunc(0.5) = 0, and m carries the value
			"constant-3", func(int) float32 { return 3 },
			q41Block(h0, 0x4200, [32]uint8{}),
		},
		{
			// min 0, max 15: d = 1, q = trunc(x + 0.5) — halves round up, 15.5 clamps to 15
			"0..15-halves", func(j int) float32 { return float32(min(j, 30)) / 2 },
			q41Block(hOne, h0, levels(func(j int) uint8 { return uint8(min(15, (j+1)/2)) })),
		},
		{
			// min −1, max 14: d = 1, m = −1
			"-1..14", func(j int) float32 { return float32(j%16) - 1 },
			q41Block(hOne, hMinus1, levels(func(j int) uint8 { return uint8(j % 16) })),
		},
		{
			// all NaN: min and max keep ±FLT_MAX, d = −inf, m = +inf (fp16 overflow),
			// id = 1/−inf = −0, and NaN·−0 + 0.5 is NaN, which the int8 cast turns into −128
			// (see cvtInt8): every byte is 0x80.
			"all-NaN", func(int) float32 { return nan },
			append([]byte{0x00, 0xfc, 0x00, 0x7c}, bytes.Repeat([]byte{0x80}, 16)...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 32)
			for j := range x {
				x[j] = tc.x(j)
			}
			f, _ := Lookup(dtype.Q4_1)
			got := make([]byte, q41BlockBytes)
			f.Quantize(got, x)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got  %x\nwant %x", got, tc.want)
			}
		})
	}
}
