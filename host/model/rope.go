package model

import (
	"encoding/binary"
	"math"
)

// Fill writes the (cos θ_i, sin θ_i) pairs of each position into dst (len(pos)·NRot values):
// θ_i = (pos/Scale) · Base^(−2i/NRot) / Freqs[i], computed in float64 (cos and sin times Attn)
// and rounded once.
func (t RopeTable) Fill(dst []float32, pos []int32) {
	half := t.NRot / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = math.Pow(t.Base, -2*float64(i)/float64(t.NRot))
		if t.Freqs != nil {
			inv[i] /= float64(t.Freqs[i])
		}
	}
	attn := t.Attn
	if attn == 0 {
		attn = 1
	}
	for r, p := range pos {
		pp := float64(p) / t.Scale
		for i := 0; i < half; i++ {
			q := pp
			if !t.textPosition(i) {
				q = 0
			}
			s, c := math.Sincos(q * inv[i])
			dst[r*t.NRot+2*i] = float32(c * attn)
			dst[r*t.NRot+2*i+1] = float32(s * attn)
		}
	}
}

// textPosition reports whether pair i takes the token position (t, h or w component of
// llama.cpp's interleaved multi-section rope) rather than the 4th component, which is 0 for
// text.
func (t RopeTable) textPosition(i int) bool {
	s := t.Sections
	sum := s[0] + s[1] + s[2] + s[3]
	if sum == 0 {
		return true
	}
	i %= sum // llama.cpp's sector: the pair index modulo the sections' total
	switch {
	case i%3 == 0 && i < 3*s[0], i%3 == 1 && i < 3*s[1], i%3 == 2 && i < 3*s[2]:
		return true
	}
	return false
}

func decodeF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
