package kernels

import (
	"encoding/binary"

	"verity/repack"
)

// Helpers of the PackedDot functions, which read rows in repack's device layout (see the
// repack package doc): fp16 fields field-major at the row's start, unpacked scales at
// ScaleOff, quants in lane-interleaved planes.

// unitBytes returns the w ≤ 16 bytes of unit u in plane p of a packed row: the k-th unit
// (k = u/32) of lane u mod 32 lies in that lane's stream at k·w, cut into 16-byte pieces,
// piece m at 512·m + 16·lane.
func unitBytes(row []byte, p repack.Plane, u int) []byte {
	w := int(p.Width)
	o := (u >> 5) * w
	at := int(p.Off) + 512*(o>>4) + 16*(u&31) + o&15
	return row[at : at+w]
}

// unit32 returns the two 16-byte halves of unit u in a 32-byte-wide plane p.
func unit32(row []byte, p repack.Plane, u int) (lo, hi []byte) {
	at := int(p.Off) + 1024*(u>>5) + 16*(u&31)
	return row[at : at+16], row[at+512 : at+528]
}

// f16Field is fp16 field f (0: d, 1: m or dmin) of block b of a packed row.
func f16Field(l *repack.Layout, row []byte, f, b int) float32 {
	return f16At(row[2*(f*int(l.Blocks)+b):])
}

// le64At reads 8 bytes little-endian at b[i:].
func le64At(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
