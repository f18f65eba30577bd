package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestQ8_KMatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q8_K) }

func TestQ8_KDequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q8_K)
	f, _ := Lookup(dtype.Q8_K)
	checkDequantAgainst(t, f, blocks, want)
}

// q8KBlock builds a block from d and the 256 quants, with the bsums they imply.
func q8KBlock(d float32, q *[256]int8) []byte {
	b := make([]byte, q8KBlockBytes)
	binary.LittleEndian.PutUint32(b, math.Float32bits(d))
	for j, v := range q {
		b[4+j] = uint8(v)
	}
	for k := 0; k < 16; k++ {
		s := 0
		for _, v := range q[16*k : 16*k+16] {
			s += int(v)
		}
		binary.LittleEndian.PutUint16(b[260+2*k:], uint16(int16(s)))
	}
	return b
}

func TestQ8_KDequantizeDefinition(t *testing.T) {
	var q [256]int8
	for j := range q {
		q[j] = int8(j - 128)
	}
	f, _ := Lookup(dtype.Q8_K)
	for _, d := range []float32{1, 0.0078125, -3.25e-5, 1.5e-40, 3e38} {
		b := q8KBlock(d, &q)
		exact := make([]float64, 256)
		got := make([]float32, 256)
		f.Dequantize(got, b)
		for j := range got {
			exact[j] = float64(d) * float64(q[j])
			// ggml's d·q rounds once to float32
			if want := float32(exact[j]); math.Float32bits(got[j]) != math.Float32bits(want) {
				t.Errorf("d=%g value %d: %g, want %g", d, j, got[j], want)
			}
		}
		x := randomX(uint64(math.Float32bits(d)), 256)
		if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
			t.Errorf("d=%g DotRef = %g, want %g", d, got, want)
		}
	}
}

// TestQ8_KQuantizeDefinition checks blocks worked out by hand from quantize_row_q8_K_ref:
// max = the first element of largest |x|, iscale = −127/max, q = min(127, nearest_int(iscale·x))
// with ties to even, d = 1/iscale, bsums = sums of 16 quants.
func TestQ8_KQuantizeDefinition(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    func(j int) float32
		d    float32
		q    func(j int) int8
	}{
		{"zeros", func(int) float32 { return 0 }, 0, func(int) int8 { return 0 }},
		{
			// max = −127 → iscale = 1, d = 1: halves go to the even neighbour
			"ties-to-even", func(j int) float32 {
				if j == 0 {
					return -127
				}
				return float32(j%64-32) + 0.5
			},
			1,
			func(j int) int8 {
				if j == 0 {
					return -127
				}
				v := j%64 - 32 // x = v + 0.5 → the even one of v and v+1
				if v%2 != 0 {
					v++
				}
				return int8(v)
			},
		},
		{
			// max = +127 comes first, −127 later: iscale = −1, d = −1, q = −x
			"first-of-ties", func(j int) float32 {
				switch j {
				case 3:
					return 127
				case 100:
					return -127
				}
				return float32(j%7 - 3)
			},
			-1,
			func(j int) int8 {
				switch j {
				case 3:
					return -127
				case 100:
					return 127
				}
				return int8(3 - j%7)
			},
		},
		{
			// max = −2e-39 (subnormal, first of the ties): −127/max overflows to +inf, so
			// iscale·x is ±inf or NaN, nearest_int's bit trick returns −2²² or 0 for those and
			// the int8 store keeps 0; d = 1/inf = +0
			"iscale-overflows", func(j int) float32 { return float32(j%3-1) * 2e-39 },
			0,
			func(int) int8 { return 0 },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 256)
			var q [256]int8
			for j := range x {
				x[j] = tc.x(j)
				q[j] = tc.q(j)
			}
			f, _ := Lookup(dtype.Q8_K)
			got := make([]byte, q8KBlockBytes)
			f.Quantize(got, x)
			if want := q8KBlock(tc.d, &q); !bytes.Equal(got, want) {
				t.Errorf("got  %x\nwant %x", got, want)
			}
		})
	}
}
