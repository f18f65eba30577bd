//go:build amd64 && !purego

package kernels

// The attention twin's cache widening in vector form (attention_amd64.s), where the CPU has
// AVX2 and F16C: the same float32 values as widenF16Go and widenBF16Go, bit for bit (tested
// on every 16-bit pattern).

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

// widenF16 sets dst[i] = Canon(F16ToF32(src[i])), 8 values at a time where the CPU allows.
func widenF16(dst []float32, src []uint16) {
	n := len(src) &^ 7
	if vectorCPU && n > 0 {
		_ = dst[n-1]
		widenF16AVX2(&dst[0], &src[0], n)
	}
	widenF16Go(dst[n:len(src)], src[n:])
}

// widenBF16 sets dst[i] = Canon(BF16ToF32(src[i])), 8 values at a time where the CPU allows.
func widenBF16(dst []float32, src []uint16) {
	n := len(src) &^ 7
	if vectorCPU && n > 0 {
		_ = dst[n-1]
		widenBF16AVX2(&dst[0], &src[0], n)
	}
	widenBF16Go(dst[n:len(src)], src[n:])
}
