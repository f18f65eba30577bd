package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestQ8_0MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q8_0) }

func TestQ8_0DequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q8_0)
	f, _ := Lookup(dtype.Q8_0)
	checkDequantAgainst(t, f, blocks, want)
}

// q80Block builds a block from d's bits and the 32 quants.
func q80Block(d uint16, q [32]int8) []byte {
	b := make([]byte, q80BlockBytes)
	binary.LittleEndian.PutUint16(b, d)
	for j, v := range q {
		b[2+j] = uint8(v)
	}
	return b
}

func TestQ8_0DequantizeDefinition(t *testing.T) {
	var q [32]int8
	for j := range q {
		q[j] = int8(j*8 - 128) // −128 … 120
	}
	q[31] = 127
	for _, d := range []uint16{hHalf, hMinus1, hMax, hTiny, hNeg0, hOnePlu} {
		b := q80Block(d, q)
		exact := make([]float64, 32)
		for j := range exact {
			exact[j] = float64(q[j]) * halfValue[d] // exact in float32: 11 × 8 bits
		}
		f, _ := Lookup(dtype.Q8_0)
		got := make([]float32, 32)
		f.Dequantize(got, b)
		for j := range got {
			if want := float32(exact[j]); math.Float32bits(got[j]) != math.Float32bits(want) {
				t.Errorf("d=%#04x value %d: %g, want %g", d, j, got[j], want)
			}
		}
		x := randomX(uint64(d), 32)
		if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
			t.Errorf("d=%#04x DotRef = %g, want %g", d, got, want)
		}
	}
}

// TestQ8_0QuantizeDefinition checks blocks worked out by hand from quantize_row_q8_0_ref:
// d = amax/127, q = roundf(x/d), half away from zero.
func TestQ8_0QuantizeDefinition(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		x    func(j int) float32
		want func() []byte
	}{
		{"zeros", func(int) float32 { return 0 }, func() []byte { return make([]byte, q80BlockBytes) }},
		{
			// amax 127 → d = 1: halves round away from zero
			"halves", func(j int) float32 {
				if j == 0 {
					return -127
				}
				return float32(j-16) + 0.5
			},
			func() []byte {
				var q [32]int8
				q[0] = -127
				for j := 1; j < 32; j++ {
					v := j - 16 // x = v + 0.5
					if v >= 0 {
						q[j] = int8(v + 1)
					} else {
						q[j] = int8(v)
					}
				}
				return q80Block(hOne, q)
			},
		},
		{
			// amax = 127·65520 → d = 65520, which rounds to fp16 inf; the quants still use the
			// float32 d: x = k·65520 gives q = k
			"d-overflows-fp16", func(j int) float32 {
				if j == 0 {
					return 127 * 65520
				}
				return float32(8*j-124) * 65520
			},
			func() []byte {
				var q [32]int8
				q[0] = 127
				for j := 1; j < 32; j++ {
					q[j] = int8(8*j - 124)
				}
				return q80Block(hInf, q)
			},
		},
		{
			// amax = 1e-40: d = 7.9e-43 is fp16 0 and 1/d = +inf; roundf(±inf or NaN) cast to
			// int8 gives −128 (cvttps2dq + packsswb, see cvtInt8)
			"1/d-overflows", func(j int) float32 { return float32(j%3-1) * 1e-40 },
			func() []byte { return append([]byte{0, 0}, bytes.Repeat([]byte{0x80}, 32)...) },
		},
		{
			// MAX(amax, |x|) = amax > |x| ? amax : |x| lets a NaN in, and the next element
			// replaces it: here the NaN at 30 is dropped by x[31] = 2, so d = 2/127 and the
			// NaN's quant is −128
			"NaN-then-value", func(j int) float32 {
				switch j {
				case 30:
					return nan
				case 31:
					return 2
				}
				return 0
			},
			func() []byte {
				var q [32]int8
				q[30], q[31] = -128, 127
				return q80Block(0x2408, q) // fp16(2/127) = 0x2408
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 32)
			for j := range x {
				x[j] = tc.x(j)
			}
			f, _ := Lookup(dtype.Q8_0)
			got := make([]byte, q80BlockBytes)
			f.Quantize(got, x)
			if want := tc.want(); !bytes.Equal(got, want) {
				t.Errorf("got  %x\nwant %x", got, want)
			}
		})
	}
}
