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

// populate maps pages of the mapping b that are in the page cache into the process's page
// tables (MADV_POPULATE_READ, Linux 5.14), so that the kernels reading them later take no
// fault; best effort (an older kernel refuses it, and the pages fault in as before).
func populate(b []byte) { unix.Madvise(b, unix.MADV_POPULATE_READ) }

// readahead starts reading [off, off+n) of fd into the page cache without copying it out
// (POSIX_FADV_WILLNEED, which reads even on a descriptor advised random); false if the kernel
// refused.
func readahead(fd *os.File, off, n int64) bool {
	return unix.Fadvise(int(fd.Fd()), off, n, unix.FADV_WILLNEED) == nil
}
