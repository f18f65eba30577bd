package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// seedValue is a --seed flag: a number from 0 to 2^64−1, or −1 for a seed drawn at random
// (as llama.cpp's −1 means), which drawn reports so the run can be repeated.
type seedValue struct {
	seed  *uint64
	drawn bool
}

func newSeedValue(p *uint64) *seedValue { return &seedValue{seed: p} }

func (s *seedValue) String() string { return strconv.FormatUint(*s.seed, 10) }
func (s *seedValue) Type() string   { return "seed" }

func (s *seedValue) Set(v string) error {
	if v == "-1" {
		*s.seed, s.drawn = rand.Uint64(), true
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("want a number from 0 to %d, or -1 for a random seed", uint64(1<<64-1))
	}
	*s.seed, s.drawn = n, false
	return nil
}
