//go:build !cuda

package cuda

import "verity/device"

// Count returns 0: this binary was built without the cuda tag.
func Count() int { return 0 }

// Open returns device.ErrNotBuilt: this binary was built without the cuda tag.
func Open(ordinal int) (device.Backend, error) {
	return nil, device.ErrNotBuilt
}

// Lost returns nil: without the cuda tag no device can fault.
func Lost() error { return nil }
