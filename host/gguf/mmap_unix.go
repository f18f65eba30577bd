//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	adviceRandom   = unix.MADV_RANDOM
	adviceWillNeed = unix.MADV_WILLNEED
	adviceDontNeed = unix.MADV_DONTNEED
)

// mapFile maps size bytes of fd read-only and shared, as llama.cpp does.
func mapFile(fd *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > math.MaxInt {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	return unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

func madvise(b []byte, advice int) error { return unix.Madvise(b, advice) }

// inode is the file's inode number.
func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Ino)
	}
	return 0
}
