//go:build amd64 && !purego

package exec

import "github.com/klauspost/cpuid/v2"

// vectorKeys: the CPU runs copyKeysAVX2.
var vectorKeys = cpuid.CPU.Supports(cpuid.AVX2)

// copyKeysAVX2 copies blocks·32 keys from src to dst and returns the largest of them, taken
// as unsigned (a negative key is above every slot).
//
//go:noescape
func copyKeysAVX2(dst, src *int32, blocks int) uint32

// vectorCopyKeys copies src's whole 32-key blocks into dst and returns how many keys it
// copied and the largest, unsigned; 0, 0 without the vector form or a whole block.
func vectorCopyKeys(dst, src []int32) (int, uint32) {
	blocks := len(src) / 32
	if !vectorKeys || blocks == 0 {
		return 0, 0
	}
	_ = dst[:32*blocks]
	return 32 * blocks, copyKeysAVX2(&dst[0], &src[0], blocks)
}
