package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/quant"
)

var kquantTypes = []dtype.Type{dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K}

// kquantFields gives, per type, the byte offsets of its fp16 super-block scales and of its
// scale bytes.
var kquantFields = map[dtype.Type]struct {
	halves         []int // d (and dmin)
	scaleLo, scaHi int   // scale bytes [scaleLo, scaHi)
}{
	dtype.Q2_K: {[]int{80, 82}, 0, 16},
	dtype.Q3_K: {[]int{108}, 96, 108},
	dtype.Q4_K: {[]int{0, 2}, 4, 16},
	dtype.Q5_K: {[]int{0, 2}, 4, 16},
	dtype.Q6_K: {[]int{208}, 192, 208},
}

// kquantHalves are fp16 bit patterns for d and dmin: zeros, subnormals, normals, the largest
// finite values, infinities and a NaN.
var kquantHalves = []uint16{
	0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x2e66, 0x1800, 0x7bff, 0xfbff,
	0x7c00, 0xfc00, 0x7e00,
}

// TestKQuantDecodeMatchesHost: Decode gives host/quant's Dequantize bit for bit on random
// blocks with random and special fp16 scales, and on blocks with every value of every scale
// byte.
func TestKQuantDecodeMatchesHost(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, wt := range kquantTypes {
		t.Run("type="+wt.String(), func(t *testing.T) {
			f, err := kernels.Lookup(wt)
			if err != nil {
				t.Fatal(err)
			}
			q, err := quant.Lookup(wt)
			if err != nil {
				t.Fatal(err)
			}
			bb, fl := wt.BlockBytes(), kquantFields[wt]
			var blocks [][]byte
			randBlock := func() []byte {
				b := make([]byte, bb)
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				for _, off := range fl.halves {
					h := kquantHalves[r.IntN(len(kquantHalves))]
					if r.IntN(2) == 0 {
						h = uint16(r.IntN(0x7c00)) | uint16(r.IntN(2))<<15 // any finite half
					}
					binary.LittleEndian.PutUint16(b[off:], h)
				}
				return b
			}
			for range 500 {
				blocks = append(blocks, randBlock())
			}
			// every value of every scale byte
			for p := fl.scaleLo; p < fl.scaHi; p++ {
				for v := range 256 {
					b := randBlock()
					b[p] = byte(v)
					blocks = append(blocks, b)
				}
			}
			// extreme quants: all bits clear, all bits set
			for _, fill := range []byte{0x00, 0xff} {
				for _, h := range kquantHalves {
					b := make([]byte, bb)
					for i := range b {
						b[i] = fill
					}
					for _, off := range fl.halves {
						binary.LittleEndian.PutUint16(b[off:], h)
					}
					blocks = append(blocks, b)
				}
			}
			got, want := make([]float32, 256), make([]float32, 256)
			for n, b := range blocks {
				f.Decode(got, b)
				q.Dequantize(want, b)
				for i := range got {
					if !sameOrNaN(got[i], want[i]) {
						t.Fatalf("block %d (% x) value %d: decoded %v (%#08x), host %v (%#08x)", n, b, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
			// a multi-block row decodes block by block
			row := append(append([]byte{}, blocks[0]...), blocks[1]...)
			got2, want2 := make([]float32, 512), make([]float32, 512)
			f.Decode(got2, row)
			q.Dequantize(want2, row)
			for i := range got2 {
				if !sameOrNaN(got2[i], want2[i]) {
					t.Fatalf("two-block row, value %d: %v, host %v", i, got2[i], want2[i])
				}
			}
		})
	}
}

// q8KUniform is a q8_K activation block with d = 0.25 and every quant 1 (x = 0.25 throughout).
func q8KUniform() []byte {
	b := make([]byte, 292)
	binary.LittleEndian.PutUint32(b, math.Float32bits(0.25))
	for i := 4; i < 260; i++ {
		b[i] = 1
	}
	for j := 0; j < 16; j++ {
		binary.LittleEndian.PutUint16(b[260+2*j:], 16)
	}
	return b
}

// fillBytes sets b[lo:hi] to v.
func fillBytes(b []byte, lo, hi int, v byte) {
	for i := lo; i < hi; i++ {
		b[i] = v
	}
}

// TestKQuantHandComputed: one weight block with chosen scales and quants against a uniform
// activation block (d = 0.25, q = 1), with the products worked out by hand. Sub-block s is
// values 32s … 32s+31.
func TestKQuantHandComputed(t *testing.T) {
	cases := []struct {
		t     dtype.Type
		block func() []byte
		// decoded value of each sub-block s
		values [8]float32
		dot    float32
	}{
		{
			// d = 1, dmin = 0.5, sc_g = 1, m_g = 2, q of sub-block s = s mod 4 (qs bytes 0b11100100):
			// x = q − 1; dot = Σ_s 32·0.25·(q_s − 1) = 8·(2·6 − 8) = 32.
			t: dtype.Q2_K,
			block: func() []byte {
				b := make([]byte, 84)
				fillBytes(b, 0, 16, 0x21)
				fillBytes(b, 16, 80, 0xe4)
				binary.LittleEndian.PutUint16(b[80:], 0x3c00)
				binary.LittleEndian.PutUint16(b[82:], 0x3800)
				return b
			},
			values: [8]float32{-1, 0, 1, 2, -1, 0, 1, 2},
			dot:    32,
		},
		{
			// d = 1, every 6-bit scale 34 (sc − 32 = 2), r of sub-block s = s mod 4, hmask bit set
			// for s < 4 only: q = 0, 1, 2, 3, −4, −3, −2, −1; x = 2q;
			// dot = Σ_s 32·0.25·2q_s = 16·(6 − 10) = −64.
			t: dtype.Q3_K,
			block: func() []byte {
				b := make([]byte, 110)
				fillBytes(b, 0, 32, 0x0f)
				fillBytes(b, 32, 96, 0xe4)
				fillBytes(b, 96, 104, 0x22)
				fillBytes(b, 104, 108, 0xaa)
				binary.LittleEndian.PutUint16(b[108:], 0x3c00)
				return b
			},
			values: [8]float32{0, 2, 4, 6, -8, -6, -4, -2},
			dot:    -64,
		},
		{
			// d = 1, dmin = 0.5, sc_s = s+1, m_s = 2, q = 3 (low nibbles, even s) or 5 (odd s):
			// x = (s+1)·q_s − 1; dot = Σ_s 8·((s+1)·q_s − 1) = 8·(3·16 + 5·20 − 8) = 1120.
			t: dtype.Q4_K,
			block: func() []byte {
				b := make([]byte, 144)
				binary.LittleEndian.PutUint16(b[0:], 0x3c00)
				binary.LittleEndian.PutUint16(b[2:], 0x3800)
				for s := 0; s < 4; s++ {
					b[4+s] = byte(s + 1)
					b[8+s] = 2
					b[12+s] = byte(s+5) | 2<<4
				}
				fillBytes(b, 16, 144, 0x53)
				return b
			},
			values: [8]float32{2, 9, 8, 19, 14, 29, 20, 39},
			dot:    1120,
		},
		{
			// as q4_K, plus qh bytes 0x0f (bit 4 of q set for s < 4): q_s = 19, 21, 19, 21, 3, 5, 3, 5;
			// dot = 8·(Σ_s (s+1)·q_s − 8) = 8·(308 − 8) = 2400.
			t: dtype.Q5_K,
			block: func() []byte {
				b := make([]byte, 176)
				binary.LittleEndian.PutUint16(b[0:], 0x3c00)
				binary.LittleEndian.PutUint16(b[2:], 0x3800)
				for s := 0; s < 4; s++ {
					b[4+s] = byte(s + 1)
					b[8+s] = 2
					b[12+s] = byte(s+5) | 2<<4
				}
				fillBytes(b, 16, 48, 0x0f)
				fillBytes(b, 48, 176, 0x53)
				return b
			},
			values: [8]float32{18, 41, 56, 83, 14, 29, 20, 39},
			dot:    2400,
		},
		{
			// d = 1, sc_g = g − 8, ql bytes 0x21, qh bytes 0b11100100: with k = s mod 4,
			// q − 32 = −31, −15, 2, 18 for k = 0…3. Unit s holds groups 2s, 2s+1, so
			// dot = Σ_s 0.25·16·(q_s − 32)·(4s − 15)
			//     = 4·(465 + 165 − 14 − 54 − 31 − 75 + 18 + 234) = 2832.
			t: dtype.Q6_K,
			block: func() []byte {
				b := make([]byte, 210)
				fillBytes(b, 0, 128, 0x21)
				fillBytes(b, 128, 192, 0xe4)
				for g := 0; g < 16; g++ {
					b[192+g] = byte(int8(g - 8))
				}
				binary.LittleEndian.PutUint16(b[208:], 0x3c00)
				return b
			},
			// first value of each sub-block s: (q_s − 32)·(2s − 8)
			values: [8]float32{248, 90, -8, -36, 0, -30, 8, 108},
			dot:    2832,
		},
	}
	x := q8KUniform()
	for _, c := range cases {
		t.Run("type="+c.t.String(), func(t *testing.T) {
			f, err := kernels.Lookup(c.t)
			if err != nil {
				t.Fatal(err)
			}
			b := c.block()
			if got := f.Dot(b, x, 256); got != c.dot {
				t.Errorf("dot = %v, want %v", got, c.dot)
			}
			vals := make([]float32, 256)
			f.Decode(vals, b)
			for s, want := range c.values {
				if vals[32*s] != want {
					t.Errorf("value %d (sub-block %d) = %v, want %v", 32*s, s, vals[32*s], want)
				}
			}
		})
	}
}

// TestKQuantDotExtremes: blocks at the limits of every field (largest scales and quants
// against ±127 activations) keep the unit sums exact (no int32 or float32 overflow): the
// result equals the float64 sum of the decoded products to float32 accuracy.
func TestKQuantDotExtremes(t *testing.T) {
	for _, wt := range kquantTypes {
		for _, wfill := range []byte{0x00, 0x55, 0xaa, 0xff} {
			for _, sign := range []int8{127, -127} {
				t.Run(fmt.Sprintf("type=%s/fill=%#02x/a=%d", wt, wfill, sign), func(t *testing.T) {
					f, _ := kernels.Lookup(wt)
					q, _ := quant.Lookup(wt)
					b := make([]byte, wt.BlockBytes())
					fillBytes(b, 0, len(b), wfill)
					for _, off := range kquantFields[wt].halves {
						binary.LittleEndian.PutUint16(b[off:], 0x3c00)
					}
					x := make([]byte, 292)
					binary.LittleEndian.PutUint32(x, math.Float32bits(1))
					fillBytes(x, 4, 260, byte(sign))
					for j := 0; j < 16; j++ {
						binary.LittleEndian.PutUint16(x[260+2*j:], uint16(int16(16*int(sign))))
					}
					vals := make([]float32, 256)
					q.Dequantize(vals, b)
					var want float64
					for _, v := range vals {
						want += float64(v) * float64(sign)
					}
					if got := f.Dot(b, x, 256); math.Abs(float64(got)-want) > 1e-6*math.Max(math.Abs(want), 1) {
						t.Errorf("dot = %v, want %v", got, want)
					}
				})
			}
		}
	}
}

func BenchmarkKQuantDot(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, wt := range kquantTypes {
		for _, cols := range []int{2048, 8192} {
			b.Run(fmt.Sprintf("type=%s/cols=%d", wt, cols), func(b *testing.B) {
				f, _ := kernels.Lookup(wt)
				q, _ := quant.Lookup(wt)
				rb, _ := wt.RowBytes(int64(cols))
				row := make([]byte, rb)
				q.Quantize(row, randF32(r, cols, 1))
				x := make([]byte, f.Act.RowBytes(cols))
				kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
				b.SetBytes(rb)
				b.ResetTimer()
				var sink float32
				for range b.N {
					sink += f.Dot(row, x, cols)
				}
				_ = sink
			})
		}
	}
}
