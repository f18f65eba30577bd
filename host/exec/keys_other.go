//go:build !amd64 || purego

package exec

// vectorCopyKeys: no vector form here; copyKeys copies and checks every key in Go.
func vectorCopyKeys(dst, src []int32) (int, uint32) { return 0, 0 }
