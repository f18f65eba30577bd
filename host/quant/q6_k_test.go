package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// TestQ6KDequantizeDefinition builds a block field by field from the layout and checks every
// value against x = (d·sc)·(q − 32), rounded in float32 step by step as ggml does (with an
// 11-bit d, an 8-bit sc and a 6-bit q the second product can round).
func TestQ6KDequantizeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	for _, d := range []float32{0.375, 0.33325195, -1.9990234, 0x1p-24} {
		var sc [16]int8
		var q [qkK]uint8
		block := make([]byte, 210)
		for j := range 16 {
			sc[j] = int8(r.IntN(256) - 128)
			block[192+j] = uint8(sc[j])
		}
		for v := range qkK {
			q[v] = uint8(r.IntN(64))
			h, k, l := v/128, v%128/32, v%32
			block[64*h+32*(k%2)+l] |= (q[v] & 0xf) << (4 * (k / 2))
			block[128+32*h+l] |= (q[v] >> 4) << (2 * k)
		}
		binary.LittleEndian.PutUint16(block[208:], fp16Exact(t, d))
		want := make([]float32, qkK)
		for v := range want {
			want[v] = float32(d*float32(sc[v/16])) * float32(int(q[v])-32)
		}
		checkKDequant(t, dtype.Q6_K, block, want)
	}
	// One value by hand: value 200 (group 12), d = 0.5, sc = −3, q = 40 (8): 0.5·(−3)·8 = −12.
	block := make([]byte, 210)
	block[192+12] = 0xfd
	block[64+8] = 8 << 4 // 200 = 128 + 64 + 8: k = 2, high nibble of byte 64 + 8
	block[128+32+8] = 2 << 4
	binary.LittleEndian.PutUint16(block[208:], 0x3800)
	y := make([]float32, qkK)
	q6K{}.Dequantize(y, block)
	if y[200] != -12 || y[201] != 48 {
		t.Errorf("got %g, %g; want −12, 48", y[200], y[201])
	}
}
