//go:build unix

package packfile

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(fd *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > math.MaxInt {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	return unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }

// advise reads [off, end) of the mapping ahead (MADV_WILLNEED), or drops it: from the
// process's page tables (MADV_DONTNEED) and then from the page cache (POSIX_FADV_DONTNEED,
// which leaves pages another process maps).
func advise(fd *os.File, data []byte, off, end int64, need bool) error {
	if need {
		if err := unix.Madvise(data[off:end], unix.MADV_WILLNEED); err != nil {
			return fmt.Errorf("packfile: madvise: %w", err)
		}
		return nil
	}
	if err := unix.Madvise(data[off:end], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("packfile: madvise: %w", err)
	}
	if err := fadviseDontNeed(fd, off, end-off); err != nil {
		return fmt.Errorf("packfile: fadvise: %w", err)
	}
	return nil
}

func adviseMapRandom(data []byte) error {
	if err := unix.Madvise(data, unix.MADV_RANDOM); err != nil {
		return fmt.Errorf("packfile: madvise: %w", err)
	}
	return nil
}
