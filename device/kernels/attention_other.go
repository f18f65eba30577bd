//go:build !amd64 || purego

package kernels

// widenF16 sets dst[i] = Canon(F16ToF32(src[i])).
func widenF16(dst []float32, src []uint16) { widenF16Go(dst, src) }

// widenBF16 sets dst[i] = Canon(BF16ToF32(src[i])).
func widenBF16(dst []float32, src []uint16) { widenBF16Go(dst, src) }
