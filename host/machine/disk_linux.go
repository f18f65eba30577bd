package machine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// readChunk is the size of one unbuffered read: large enough that a disk streams.
const readChunk = 4 << 20

// measureRead reads up to limit bytes of the file at path sequentially, bypassing the page
// cache (O_DIRECT), or where the file system refuses O_DIRECT, dropping each chunk from the
// cache before reading it (so that cached pages do not pass for the disk's speed; a file on
// tmpfs lives in memory, and reads at memory speed either way). It stops early after budget.
func measureRead(path string, limit int64, budget time.Duration) (Disk, error) {
	if _, err := os.Stat(path); err != nil {
		return Disk{}, fmt.Errorf("machine: %w", err)
	}
	d := Disk{Path: path, Device: deviceOf(path)}
	// the buffer must be aligned for O_DIRECT: an anonymous mapping is page-aligned
	buf, err := unix.Mmap(-1, 0, readChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return Disk{}, fmt.Errorf("machine: %w", err)
	}
	defer unix.Munmap(buf)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	d.Method = "O_DIRECT"
	if err != nil {
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return Disk{}, fmt.Errorf("machine: %w", err)
		}
		d.Method = "drop-behind"
	}
	defer unix.Close(fd)
	start := time.Now()
	var off int64
	for off < limit && time.Since(start) < budget {
		n := int64(readChunk)
		if d.Method == "drop-behind" {
			unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
		}
		got, err := unix.Pread(fd, buf, off)
		if errors.Is(err, unix.EINVAL) && d.Method == "O_DIRECT" && off == 0 {
			// opened, but O_DIRECT reads refused (some file systems): measure the other way
			unix.Close(fd)
			if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				return Disk{}, fmt.Errorf("machine: %w", err)
			}
			d.Method = "drop-behind"
			start = time.Now()
			continue
		}
		if err != nil && err != io.EOF {
			return Disk{}, fmt.Errorf("machine: read %s: %w", path, err)
		}
		if got <= 0 {
			break
		}
		off += int64(got)
		if got < readChunk {
			break // the end of the file (an O_DIRECT read stops at the last whole block)
		}
	}
	el := time.Since(start)
	if off == 0 || el <= 0 {
		return Disk{}, fmt.Errorf("machine: %s: nothing to read", path)
	}
	d.Bytes, d.BytesPerSec = off, float64(off)/el.Seconds()
	return d, nil
}

// deviceOf is the st_dev of the file at path (0 if it cannot be read).
func deviceOf(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return uint64(st.Dev)
}
