package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

// fp16 bit patterns and their values, for hand-built blocks.
const (
	h0      = 0x0000 // +0
	hNeg0   = 0x8000 // −0
	hHalf   = 0x3800 // 0.5
	hOne    = 0x3c00 // 1
	hMinus1 = 0xbc00 // −1
	hTiny   = 0x0001 // 2⁻²⁴, the smallest subnormal
	hMax    = 0x7bff // 65504
	hInf    = 0x7c00 // +inf
	hOnePlu = 0x3c01 // 1 + 2⁻¹⁰
)

var halfValue = map[uint16]float64{
	h0: 0, hNeg0: math.Copysign(0, -1), hHalf: 0.5, hOne: 1, hMinus1: -1,
	hTiny: math.Ldexp(1, -24), hMax: 65504, hInf: math.Inf(1), hOnePlu: 1 + math.Ldexp(1, -10),
}

func TestQ4_0MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q4_0) }

func TestQ4_0DequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q4_0)
	f, _ := Lookup(dtype.Q4_0)
	checkDequantAgainst(t, f, blocks, want)
}

// q40Block builds a block from d's bits and the 32 levels q (0…15).
func q40Block(d uint16, q [32]uint8) []byte {
	b := make([]byte, q40BlockBytes)
	binary.LittleEndian.PutUint16(b, d)
	for j := 0; j < 16; j++ {
		b[2+j] = q[j] | q[j+16]<<4
	}
	return b
}

func TestQ4_0DequantizeDefinition(t *testing.T) {
	var ramp, fifteen, eight [32]uint8
	for j := range ramp {
		ramp[j] = uint8(j % 16)
		fifteen[j] = 15
		eight[j] = 8
	}
	for _, tc := range []struct {
		name string
		d    uint16
		q    [32]uint8
	}{
		{"d=0.5/ramp", hHalf, ramp},
		{"d=-1/ramp", hMinus1, ramp},
		{"d=65504/ramp", hMax, ramp},
		{"d=tiny/ramp", hTiny, ramp},
		{"d=-0/ramp", hNeg0, ramp},
		{"d=inf/ramp", hInf, ramp},
		{"d=1/all15", hOne, fifteen},
		{"d=1/all8", hOne, eight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := q40Block(tc.d, tc.q)
			want := make([]float32, 32)
			exact := make([]float64, 32)
			for j := range want {
				// (q−8)·d is exact in float32 for every fp16 d; the IEEE product gives the
				// signs of zeros and NaN for 0·inf.
				exact[j] = float64(int(tc.q[j])-8) * halfValue[tc.d]
				want[j] = float32(exact[j])
			}
			f, _ := Lookup(dtype.Q4_0)
			got := make([]float32, 32)
			f.Dequantize(got, b)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
					t.Errorf("value %d: %g (%#08x), want %g", j, got[j], math.Float32bits(got[j]), want[j])
				}
			}
			if tc.d == hInf {
				return
			}
			x := randomX(uint64(tc.d), 32)
			if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
				t.Errorf("DotRef = %g, want %g", got, want)
			}
		})
	}
}

// TestQ4_0QuantizeDefinition checks blocks worked out by hand from quantize_row_q4_0_ref:
// max = the first element of largest |x|, d = max/−8, q = min(15, trunc(x/d + 8.5)).
func TestQ4_0QuantizeDefinition(t *testing.T) {
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
		{
			// d = −0 (0/−8), id = 0: every x·0 + 8.5 truncates to 8
			"zeros", func(int) float32 { return 0 },
			q40Block(hNeg0, levels(func(int) uint8 { return 8 })),
		},
		{
			// max = −8 → d = 1: q = trunc(x + 8.5) rounds the halves up; x = 7.5 gives 16 → 15
			"max=-8", func(j int) float32 { return -8 + float32(j)/2 },
			q40Block(hOne, levels(func(j int) uint8 { return uint8(min(15, (j+1)/2)) })),
		},
		{
			// max = +8 → d = −1: q = trunc(8.5 − x); x = −7.5 gives 16 → 15
			"max=+8", func(j int) float32 { return 8 - float32(j)/2 },
			q40Block(hMinus1, levels(func(j int) uint8 { return uint8(min(15, (j+1)/2)) })),
		},
		{
			// +3 comes first, so max = 3, d = −0.375; −3 maps to 8 + 8 = 16 → 15
			"first-of-ties", func(j int) float32 {
				switch j {
				case 0:
					return 3
				case 1:
					return -3
				}
				return 0
			},
			q40Block(0xb600, levels(func(j int) uint8 {
				switch j {
				case 0:
					return 0
				case 1:
					return 15
				}
				return 8
			})),
		},
		{
			// max = 1e-40 (subnormal): d = −1.25e-41 rounds to fp16 −0, and 1/d overflows to
			// −inf, so x·id = −inf and the int8 cast saturates to −128 (x86-64 cvttps2dq +
			// packsswb): the low nibble holds 0x80's low bits (0), the high nibble (−128 << 4)
			// is cut off, so every byte is 0x80.
			"1/d-overflows", func(int) float32 { return 1e-40 },
			append([]byte{0x00, 0x80}, bytes.Repeat([]byte{0x80}, 16)...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 32)
			for j := range x {
				x[j] = tc.x(j)
			}
			f, _ := Lookup(dtype.Q4_0)
			got := make([]byte, q40BlockBytes)
			f.Quantize(got, x)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got  %x\nwant %x", got, tc.want)
			}
		})
	}
}

func TestLegacyIntCasts(t *testing.T) {
	for _, tc := range []struct {
		f          float32
		i32, i8    int32
		u8         uint8
		nameOfCase string
	}{
		{0, 0, 0, 0, "zero"},
		{15.99, 15, 15, 15, "truncates"},
		{-0.99, 0, 0, 0, "toward zero"},
		{-7.5, -7, -7, 0, "negative"},
		{200.5, 200, 127, 200, "int8 saturates"},
		{300, 300, 127, 255, "uint8 saturates"},
		{-300, -300, -128, 0, "negative saturates"},
		{65536 + 5, 65541, 127, 255, "high half"},
		{float32(math.Inf(1)), math.MinInt32, -128, 0, "+inf"},
		{float32(math.Inf(-1)), math.MinInt32, -128, 0, "-inf"},
		{float32(math.NaN()), math.MinInt32, -128, 0, "NaN"},
		{3e9, math.MinInt32, -128, 0, "beyond int32"},
		{-(1 << 31), math.MinInt32, -128, 0, "INT32_MIN"},
	} {
		if got := cvtInt32(tc.f); got != tc.i32 {
			t.Errorf("%s: cvtInt32(%g) = %d, want %d", tc.nameOfCase, tc.f, got, tc.i32)
		}
		if got := cvtInt8(tc.f); got != tc.i8 {
			t.Errorf("%s: cvtInt8(%g) = %d, want %d", tc.nameOfCase, tc.f, got, tc.i8)
		}
		if got := cvtUint8(tc.f); got != tc.u8 {
			t.Errorf("%s: cvtUint8(%g) = %d, want %d", tc.nameOfCase, tc.f, got, tc.u8)
		}
	}
}
