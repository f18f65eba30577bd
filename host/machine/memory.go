package machine

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is the host memory a process may use, measured now (it changes all the time, so it is
// never cached).
type Memory struct {
	TotalBytes     int64 `json:"total_bytes"`     // MemTotal
	AvailableBytes int64 `json:"available_bytes"` // MemAvailable: free plus reclaimable page cache
	// Cgroup is the tightest memory limit of the process's control group and its ancestors;
	// nil when none is set (or the controller is not mounted).
	Cgroup *Cgroup `json:"cgroup,omitempty"`
	// BudgetBytes is what the process may still take: the smaller of AvailableBytes and the
	// cgroup's room.
	BudgetBytes int64 `json:"budget_bytes"`
}

// Cgroup is a memory control group's limit and use.
type Cgroup struct {
	Version    int    `json:"version"` // 1 (the memory controller) or 2 (memory.max)
	Dir        string `json:"dir"`     // the group whose limit binds
	LimitBytes int64  `json:"limit_bytes"`
	UsageBytes int64  `json:"usage_bytes"` // everything charged to it, page cache included
	// ReclaimableBytes is its clean file pages (page cache the kernel drops under pressure,
	// a mapped model's among them).
	ReclaimableBytes int64 `json:"reclaimable_bytes"`
	// RoomBytes is LimitBytes less what cannot be reclaimed.
	RoomBytes int64 `json:"room_bytes"`
}

// ReadMemory measures the host's memory and the process's cgroup limits.
func ReadMemory() (Memory, error) { return readMemory("/") }

// readMemory is ReadMemory with /proc and /sys under root (a directory tree in tests).
func readMemory(root string) (Memory, error) {
	var m Memory
	info, err := readKeyed(filepath.Join(root, "proc/meminfo"), ":")
	if err != nil {
		return m, fmt.Errorf("machine: %w", err)
	}
	m.TotalBytes = info["MemTotal"] * 1024
	m.AvailableBytes = info["MemAvailable"] * 1024
	if _, ok := info["MemAvailable"]; !ok { // kernels before 3.14
		m.AvailableBytes = (info["MemFree"] + info["Cached"] + info["Buffers"]) * 1024
	}
	if m.TotalBytes <= 0 {
		return m, fmt.Errorf("machine: no MemTotal in %s", filepath.Join(root, "proc/meminfo"))
	}
	m.BudgetBytes = m.AvailableBytes
	cg, err := readCgroup(root)
	if err != nil {
		return m, err
	}
	if cg != nil {
		m.Cgroup = cg
		m.BudgetBytes = min(m.BudgetBytes, cg.RoomBytes)
	}
	return m, nil
}

// noLimit is above any limit a memory controller reports for "none" (v1 writes
// 9223372036854771712, a page-rounded MaxInt64; v2 writes "max").
const noLimit = 1 << 60

// readCgroup finds the process's memory cgroup (v1's memory controller, else v2) and returns
// the tightest limit among it and its ancestors, or nil when there is none.
func readCgroup(root string) (*Cgroup, error) {
	mnt, rel, version, err := ownGroup(root)
	if err != nil || version == 0 {
		return nil, err
	}
	var best *Cgroup
	for dir := rel; ; dir = path.Dir(dir) {
		cg, err := readGroup(filepath.Join(root, mnt, dir), version)
		if err != nil {
			return nil, err
		}
		if cg != nil && (best == nil || cg.RoomBytes < best.RoomBytes) {
			cg.Dir = filepath.Join(mnt, dir)
			best = cg
		}
		if dir == "/" || dir == "." {
			return best, nil
		}
	}
}

// MemoryCgroup returns the directory of the process's memory cgroup and its version (1: the
// v1 memory controller, 2: the unified hierarchy), or version 0 when neither is mounted.
func MemoryCgroup() (dir string, version int, err error) {
	mnt, rel, version, err := ownGroup("/")
	if err != nil || version == 0 {
		return "", 0, err
	}
	return filepath.Join(mnt, rel), version, nil
}

// ownGroup finds the process's memory cgroup: the mount point of its hierarchy, the group's
// path below it, and the version (0: none mounted). v1's memory controller wins over v2, as
// the kernel enforces its limits when both are mounted.
func ownGroup(root string) (mnt, rel string, version int, err error) {
	own, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if os.IsNotExist(err) {
		return "", "", 0, nil
	} else if err != nil {
		return "", "", 0, fmt.Errorf("machine: %w", err)
	}
	mounts, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil && !os.IsNotExist(err) {
		return "", "", 0, fmt.Errorf("machine: %w", err)
	}
	var v1, v2 string // the process's group in each hierarchy
	hasV1, hasV2 := false, false
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, hasV2 = parts[2], true
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1, hasV1 = parts[2], true
			}
		}
	}
	if hasV1 {
		if mnt, mroot, ok := findMount(mounts, "cgroup", "memory"); ok {
			return mnt, below(v1, mroot), 1, nil
		}
	}
	if hasV2 {
		if mnt, mroot, ok := findMount(mounts, "cgroup2", ""); ok {
			return mnt, below(v2, mroot), 2, nil
		}
	}
	return "", "", 0, nil
}

// below is group's path relative to a mount of the hierarchy's subtree mroot ("/" when the
// group lies outside it: a namespace's root).
func below(group, mroot string) string {
	rel := path.Clean("/" + group)
	if mroot == "/" {
		return rel
	}
	if r := strings.TrimPrefix(rel, mroot); r != rel && (r == "" || r[0] == '/') {
		return path.Clean("/" + r)
	}
	return "/"
}

// findMount returns the mount point and mounted root of the first mount of file system type
// fstype (with the super option opt, if given) in a mountinfo file.
func findMount(mountinfo []byte, fstype, opt string) (point, root string, ok bool) {
	for _, line := range strings.Split(string(mountinfo), "\n") {
		// id parent major:minor root point options [optional fields] - fstype source super
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(f) || f[sep+1] != fstype {
			continue
		}
		if opt != "" {
			found := false
			for _, o := range strings.Split(f[sep+3], ",") {
				found = found || o == opt
			}
			if !found {
				continue
			}
		}
		return unescapeMount(f[4]), unescapeMount(f[3]), true
	}
	return "", "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readGroup reads one group's limit, use and reclaimable page cache; nil when it has no limit
// (or its files are absent: the controller is not enabled there).
func readGroup(dir string, version int) (*Cgroup, error) {
	limitFile, usageFile := "memory.limit_in_bytes", "memory.usage_in_bytes"
	if version == 2 {
		limitFile, usageFile = "memory.max", "memory.current"
	}
	limit, ok, err := readNumber(filepath.Join(dir, limitFile))
	if err != nil || !ok || limit >= noLimit {
		return nil, err
	}
	usage, _, err := readNumber(filepath.Join(dir, usageFile))
	if err != nil {
		return nil, err
	}
	stat, err := readKeyed(filepath.Join(dir, "memory.stat"), " ")
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("machine: %w", err)
	}
	// Clean file pages: active and inactive, less those dirty or being written back.
	var file int64
	if version == 1 {
		file = stat["total_inactive_file"] + stat["total_active_file"] - stat["total_dirty"] - stat["total_writeback"]
	} else {
		file = stat["inactive_file"] + stat["active_file"] - stat["file_dirty"] - stat["file_writeback"]
	}
	file = min(max(file, 0), usage)
	return &Cgroup{Version: version, LimitBytes: limit, UsageBytes: usage, ReclaimableBytes: file,
		RoomBytes: max(0, limit-(usage-file))}, nil
}

// readNumber reads a file holding one number (or "max": no limit); ok is false when the file
// does not exist.
func readNumber(name string) (int64, bool, error) {
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("machine: %w", err)
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return math.MaxInt64, true, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("machine: %s: %q is not a number", name, s)
	}
	return v, true, nil
}

// readKeyed reads "key<sep> value [unit]" lines into a map (meminfo's kB values stay kB).
func readKeyed(name, sep string) (map[string]int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), sep)
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		if v, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
			out[strings.TrimSpace(k)] = v
		}
	}
	return out, sc.Err()
}
