//go:build !unix

package gguf

import (
	"errors"
	"os"
)

// Without mmap support Open reads the whole file and the madvise helpers do nothing.

const (
	adviceRandom = iota
	adviceWillNeed
	adviceDontNeed
)

func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("mmap not supported") }

func unmapFile([]byte) error { return nil }

func madvise([]byte, int) error { return nil }

func inode(os.FileInfo) uint64 { return 0 }
