package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// TestQ3KDequantizeDefinition builds a block field by field from the layout and checks every
// value against x = (d·(sc − 32))·(q − 4), rounded in float32 step by step as ggml does.
func TestQ3KDequantizeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	for _, d := range []float32{0.375, 0.33325195, -1.9990234, 0x1p-24} {
		var sc [16]uint8
		var q [qkK]uint8
		block := make([]byte, 110)
		for j := range 16 {
			sc[j] = uint8(r.IntN(64))
			if j < 8 {
				block[96+j] |= sc[j] & 0xf
			} else {
				block[96+j-8] |= (sc[j] & 0xf) << 4
			}
			block[96+8+j%4] |= (sc[j] >> 4) << (2 * (j / 4))
		}
		for v := range qkK {
			q[v] = uint8(r.IntN(8))
			h, s, l := v/128, v%128/32, v%32
			block[32+32*h+l] |= (q[v] & 3) << (2 * s)
			block[v%32] |= (q[v] >> 2) << (v / 32)
		}
		binary.LittleEndian.PutUint16(block[108:], fp16Exact(t, d))
		want := make([]float32, qkK)
		for v := range want {
			want[v] = float32(d*float32(int(sc[v/16])-32)) * float32(int(q[v])-4)
		}
		checkKDequant(t, dtype.Q3_K, block, want)
	}
	// One value by hand: d = 0.5, sc = 35 (3 after the offset), q = 6 (2): 0.5·3·2 = 3.
	block := make([]byte, 110)
	block[96] = 35 & 0xf
	block[104] = 35 >> 4
	block[32] = 2
	block[0] = 1
	binary.LittleEndian.PutUint16(block[108:], 0x3800)
	y := make([]float32, qkK)
	q3K{}.Dequantize(y, block)
	if y[0] != 3 || y[1] != -6 {
		t.Errorf("got %g, %g; want 3, −6", y[0], y[1])
	}
}
