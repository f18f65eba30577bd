// Package split places a model's layers on several devices: contiguous ranges of layers, one
// range per device in device order (a pipeline), chosen so that every range fits its device's
// memory and the fullest device, relative to its memory, is as empty as possible. It is pure
// planning: the caller says what a range costs (host/exec measures a Program's stage memory)
// and runs the plan (exec.Pipeline).
package split

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoFit is returned when no placement fits the devices' memory.
var ErrNoFit = errors.New("split: the model does not fit the devices")

// Plan places n layers on len(memory) devices, at least one layer each. cost(k, lo, hi) is
// the memory device k needs to hold layers [lo, hi) — including the embedding when lo == 0
// and the output head when hi == n, which go with the first and the last stage. Plan returns
// the first layer of every stage after the first: len(memory)−1 increasing values in (0, n).
// Among the placements where every stage fits (cost ≤ memory), it returns one minimising the
// largest cost/memory ratio (the same one every time: among equal ratios, each stage's best
// prefix placement is kept, which tends to balance the other stages too).
func Plan(n int, memory []int64, cost func(k, lo, hi int) int64) ([]int, error) {
	d := len(memory)
	if d == 0 {
		return nil, errors.New("split: no devices")
	}
	if n < d {
		return nil, fmt.Errorf("split: %d layers cannot fill %d devices", n, d)
	}
	for k, m := range memory {
		if m <= 0 {
			return nil, fmt.Errorf("split: device %d has %d bytes of memory", k, m)
		}
	}
	// best[k][j]: the smallest largest ratio placing layers [0, j) on devices 0 … k, device k
	// ending at j; from[k][j] the start of device k's range in that placement.
	inf := math.Inf(1)
	best := make([][]float64, d)
	from := make([][]int, d)
	for k := range best {
		best[k] = make([]float64, n+1)
		from[k] = make([]int, n+1)
		for j := range best[k] {
			best[k][j] = inf
		}
	}
	ratio := func(k, lo, hi int) float64 {
		c := cost(k, lo, hi)
		if c > memory[k] {
			return inf
		}
		return float64(c) / float64(memory[k])
	}
	for j := 1; j <= n-(d-1); j++ {
		best[0][j] = ratio(0, 0, j)
	}
	for k := 1; k < d; k++ {
		for j := k + 1; j <= n-(d-1-k); j++ {
			for i := k; i < j; i++ { // device k holds [i, j)
				if best[k-1][i] == inf {
					continue
				}
				r := math.Max(best[k-1][i], ratio(k, i, j))
				if r < best[k][j] {
					best[k][j], from[k][j] = r, i
				}
			}
		}
	}
	if best[d-1][n] == inf {
		return nil, ErrNoFit
	}
	cuts := make([]int, d-1)
	j := n
	for k := d - 1; k > 0; k-- {
		j = from[k][j]
		cuts[k-1] = j
	}
	return cuts, nil
}
