//go:build cuda

package cuda_test

import (
	"testing"

	"verity/device/devicetest"
)

// Every kernel gives its twin's bits on launches of real model sizes. (This file's name
// sorts last, so that this slowest test runs after the others.)
func TestConformanceRealSizes(t *testing.T) {
	record(t, "conformance_real", devicetest.Run(t, open(t), devicetest.RealSizes()))
}
