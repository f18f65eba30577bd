//go:build !unix

package packfile

import (
	"errors"
	"os"
)

// Without mmap there is no packed file: Open fails, and callers pack in memory.

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("mmap not supported") }

func unmapFile([]byte) error { return nil }

func advise(*os.File, []byte, int64, int64, bool) error { return nil }

func adviseRandom(*os.File) {}

func adviseMapRandom([]byte) error { return nil }

func populate([]byte) {}

func readahead(*os.File, int64, int64) bool { return false }
