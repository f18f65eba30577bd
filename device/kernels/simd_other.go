//go:build !amd64 || purego

package kernels

import "verity/device/dtype"

// vectorForms: no vector forms on this platform or build; every PackedDot is portable Go.
func vectorForms() (map[dtype.Type]dotFunc, string) { return nil, "" }
