package machine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysfsRoot is where Linux describes the processors (a variable for tests).
var sysfsRoot = "/sys/devices/system/cpu"

// osTopology is what the operating system says of the processors this process may run on:
// their logical and physical (distinct package and core) counts, and cpu0's per-core L2 and
// shared L3 sizes. Zero where it does not say. Under a hypervisor cpuid often describes the
// host's processor (hundreds of cores, no L3), while sysfs describes the machine the process
// has.
func osTopology() (logical, physical int, l2, l3 int64) {
	cores := map[string]bool{}
	for _, cpu := range onlineCPUs() {
		dir := filepath.Join(sysfsRoot, "cpu"+strconv.Itoa(cpu), "topology")
		pkg, err1 := os.ReadFile(filepath.Join(dir, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(dir, "core_id"))
		logical++
		if err1 == nil && err2 == nil {
			cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
		}
	}
	physical = len(cores)
	for i := 0; ; i++ {
		dir := filepath.Join(sysfsRoot, "cpu0", "cache", "index"+strconv.Itoa(i))
		level, err := os.ReadFile(filepath.Join(dir, "level"))
		if err != nil {
			break
		}
		kind, _ := os.ReadFile(filepath.Join(dir, "type"))
		size, _ := os.ReadFile(filepath.Join(dir, "size"))
		if strings.TrimSpace(string(kind)) == "Instruction" {
			continue
		}
		switch strings.TrimSpace(string(level)) {
		case "2":
			l2 = parseCacheSize(string(size))
		case "3":
			l3 = parseCacheSize(string(size))
		}
	}
	return logical, physical, l2, l3
}

// onlineCPUs lists the online processors ("0-3,8-11" in sysfs's online file).
func onlineCPUs() []int {
	b, err := os.ReadFile(filepath.Join(sysfsRoot, "online"))
	if err != nil {
		return nil
	}
	var out []int
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil
		}
		z := a
		if found {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return nil
			}
		}
		for c := a; c <= z && len(out) < 1<<16; c++ {
			out = append(out, c)
		}
	}
	return out
}

// parseCacheSize reads a sysfs cache size: "1024K", "32M", or bytes.
func parseCacheSize(s string) int64 {
	s = strings.TrimSpace(s)
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mul
}
