package lora

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// availableMemory is the memory the system can give without swapping: MemAvailable of
// /proc/meminfo. ok is false where there is no such file.
func availableMemory() (n int64, ok bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
