//go:build cuda

package cuda

import "verity/device"

// SetStageMin sets the smallest transfer b stages through pinned memory (0: the default; more
// than any transfer: none).
func SetStageMin(b device.Backend, n int64) error {
	cb := b.(*Backend)
	return cb.do("test", "stage threshold", func() error {
		cb.x.stageMin = n
		return nil
	})
}

// StageChunk is the size of each pinned staging buffer.
const StageChunk = stageChunk
