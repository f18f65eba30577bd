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

// OpenPTX opens device ordinal with every module loaded from its PTX (JIT-compiled), as
// VERITY_CUDA_CODE=ptx does.
func OpenPTX(ordinal int) (*Backend, error) { return open(ordinal, codePTX) }

// OpenCubins opens device ordinal loading cubins only, as VERITY_CUDA_CODE=cubin does.
func OpenCubins(ordinal int) (*Backend, error) { return open(ordinal, codeCubin) }
