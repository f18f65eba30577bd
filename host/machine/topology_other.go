//go:build !linux

package machine

// osTopology: this platform's processors are described by cpuid alone.
func osTopology() (logical, physical int, l2, l3 int64) { return 0, 0, 0, 0 }
