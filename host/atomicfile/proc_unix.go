//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// alive reports whether process pid exists (signal 0 reaches it, or it exists but belongs to
// someone else).
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// umask is the process's file mode creation mask, read from /proc/self/status (Linux) so that
// reading it never changes it; 022 where that is not available.
var umask = sync.OnceValue(func() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(m)
				}
			}
		}
	}
	return 0o022
})
