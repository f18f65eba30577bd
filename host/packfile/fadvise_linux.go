package packfile

import (
	"os"

	"golang.org/x/sys/unix"
)

func fadviseDontNeed(fd *os.File, off, n int64) error {
	return unix.Fadvise(int(fd.Fd()), off, n, unix.FADV_DONTNEED)
}

// adviseRandom turns the kernel's readahead off for reads through fd.
func adviseRandom(fd *os.File) { unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_RANDOM) }
