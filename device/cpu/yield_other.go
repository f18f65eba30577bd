//go:build !linux

package cpu

import "runtime"

// osYield gives the processor to another goroutine that is ready to run, if any.
func osYield() { runtime.Gosched() }
