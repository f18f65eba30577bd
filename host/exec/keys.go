package exec

import (
	"encoding/binary"
	"fmt"

	"verity/device"
)

// copyKeys copies the key list src into dst (at least as long) and reports whether every key
// is a slot below n (a negative key is not): one pass over the keys, which the vector form
// (vectorCopyKeys) makes as fast as the copy alone.
func copyKeys(dst, src []int32, n int) bool {
	dst = dst[:len(src)]
	i, top := vectorCopyKeys(dst, src)
	copy(dst[i:], src[i:])
	return (i == 0 || int64(top) < int64(n)) && keysBelow(src[i:], n)
}

// keysBelow reports whether every key of keys is a slot below n (a negative key is not),
// two keys to a 64-bit word and no branch per key. For each 32-bit half k of a word, with
// c = 2³¹ − n (n taken as at most 2³¹, above every key), k + c has its top bit set when 0 ≤ k and n ≤ k, and k itself
// when k is negative; the OR of the word with the word plus c in each half keeps a top bit of
// a half exactly when its key is bad. A negative key's half may carry out into the half
// above, but that word is refused by the negative key's own bit, and no good half carries.
func keysBelow(keys []int32, n int) bool {
	lim := min(max(int64(n), 0), 1<<31)
	c := uint64(1<<31-lim) * 0x1_0000_0001
	b := device.I32Bytes(keys)
	var a0, a1, a2, a3 uint64
	for ; len(b) >= 32; b = b[32:] {
		w0 := binary.NativeEndian.Uint64(b[0:])
		w1 := binary.NativeEndian.Uint64(b[8:])
		w2 := binary.NativeEndian.Uint64(b[16:])
		w3 := binary.NativeEndian.Uint64(b[24:])
		a0 |= w0 | (w0 + c)
		a1 |= w1 | (w1 + c)
		a2 |= w2 | (w2 + c)
		a3 |= w3 | (w3 + c)
	}
	for ; len(b) >= 4; b = b[4:] {
		k := uint64(binary.NativeEndian.Uint32(b))
		a0 |= k | (k + c)
	}
	return (a0|a1|a2|a3)&0x8000_0000_8000_0000 == 0
}

// keyError is Step.check's error for the first key, in row order, of rows (numbered from
// first) that is not a slot below n; nil if there is none.
func keyError(rows [][]int32, first, n int) error {
	for i, keys := range rows {
		r := first + i
		if keysBelow(keys, n) {
			continue
		}
		for _, k := range keys {
			if k < 0 || int(k) >= n {
				return fmt.Errorf("exec: row %d: key slot %d outside cache of %d", r, k, n)
			}
		}
	}
	return nil
}
