package device

import (
	"fmt"
	"unsafe"
)

// Memory resolves device addresses to host bytes, for twins.
type Memory interface {
	// Bytes returns the n bytes at p, which must lie inside one allocation.
	Bytes(p Ptr, n int64) ([]byte, error)
}

// Exec is what a twin runs with: the backend's memory and a parallel-for over workers.
type Exec struct {
	Mem Memory
	// Workers is the number of goroutines For may use (≥ 1).
	Workers int
	// For calls body over a partition of [0, n) into contiguous chunks, possibly concurrently,
	// and returns when all are done. Twins must give the same bits for any partition, so a
	// chunk's result may depend only on its indices.
	//
	// A twin calls For exactly once, and does all its writes inside body; the writes of
	// indices [lo, hi) are bytes no other index writes. The megakernel's Go VM relies on this:
	// it runs part p of an op by giving the twin a For that calls body on Part(n, p, parts)
	// only, on whichever virtual SM the schedule put that part.
	For func(n int, body func(lo, hi int))
}

// Part returns part p of the split of [0, n) into parts contiguous ranges of near-equal size
// (the first ones smaller by at most one), the same split on every executor.
func Part(n, p, parts int) (lo, hi int) {
	return int(int64(p) * int64(n) / int64(parts)), int(int64(p+1) * int64(n) / int64(parts))
}

// Serial is an Exec's For that runs everything on the calling goroutine.
func Serial(n int, body func(lo, hi int)) {
	if n > 0 {
		body(0, n)
	}
}

// F32 returns n float32 values at p.
func (x *Exec) F32(p Ptr, n int) ([]float32, error) {
	b, err := x.Mem.Bytes(p, int64(n)*4)
	if err != nil || n == 0 {
		return nil, err
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, fmt.Errorf("device: float32 data at %#x is not 4-byte aligned", uint64(p))
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
}

// I32 returns n int32 values at p.
func (x *Exec) I32(p Ptr, n int) ([]int32, error) {
	b, err := x.Mem.Bytes(p, int64(n)*4)
	if err != nil || n == 0 {
		return nil, err
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, fmt.Errorf("device: int32 data at %#x is not 4-byte aligned", uint64(p))
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n), nil
}

// U8 returns n bytes at p.
func (x *Exec) U8(p Ptr, n int64) ([]byte, error) { return x.Mem.Bytes(p, n) }

// AsF32 reinterprets a byte slice (4-byte aligned, length a multiple of 4) as float32 values.
func AsF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// F32Bytes reinterprets float32 values as their little-endian bytes (no copy).
func F32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

// I32Bytes reinterprets int32 values as their little-endian bytes (no copy).
func I32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}
