//go:build !amd64 || purego

package kernels

import "verity/device/dtype"

// tileCPU: no tile forms here.
const tileCPU = false

// vectorTile: none here.
var vectorTile map[dtype.Type]tileFunc

// tileForms: none here.
func tileForms(bool) map[dtype.Type]tileFunc { return nil }
