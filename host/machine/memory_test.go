package machine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeTree writes files (path → content) under a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo = "MemTotal:       24683584 kB\nMemFree:        12980776 kB\nMemAvailable:   21154084 kB\nCached:          8061832 kB\n"

const v1Mounts = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const v2Mounts = "25 30 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"

func v1Stat(inactive, active, dirty int64) string {
	return "cache 1\nrss 2\ntotal_inactive_file " + itoa(inactive) + "\ntotal_active_file " + itoa(active) + "\ntotal_dirty " + itoa(dirty) + "\ntotal_writeback 0\n"
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

const mb = 1 << 20

func TestMemoryCgroups(t *testing.T) {
	for _, c := range []struct {
		name      string
		files     map[string]string
		version   int
		dir       string
		limit     int64
		budget    int64
		noCgroups bool
	}{
		{name: "v1, a 500 MB group", version: 1, dir: "/sys/fs/cgroup/memory/jobs/a", limit: 500 * mb,
			budget: 500*mb - (300*mb - 200*mb),
			files: map[string]string{
				"proc/self/cgroup":    "4:memory:/jobs/a\n1:cpu:/\n0::/\n",
				"proc/self/mountinfo": v1Mounts,
				"sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": itoa(500*mb) + "\n",
				"sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes": itoa(300*mb) + "\n",
				"sys/fs/cgroup/memory/jobs/a/memory.stat":           v1Stat(150*mb, 60*mb, 10*mb),
				"sys/fs/cgroup/memory/jobs/memory.limit_in_bytes":   "9223372036854771712\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":        "9223372036854771712\n",
			}},
		{name: "v1, the parent's limit binds", version: 1, dir: "/sys/fs/cgroup/memory/jobs", limit: 400 * mb,
			budget: 400*mb - 350*mb,
			files: map[string]string{
				"proc/self/cgroup":    "4:memory:/jobs/a\n",
				"proc/self/mountinfo": v1Mounts,
				"sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes": itoa(1000*mb) + "\n",
				"sys/fs/cgroup/memory/jobs/a/memory.usage_in_bytes": itoa(100*mb) + "\n",
				"sys/fs/cgroup/memory/jobs/memory.limit_in_bytes":   itoa(400*mb) + "\n",
				"sys/fs/cgroup/memory/jobs/memory.usage_in_bytes":   itoa(350*mb) + "\n",
			}},
		{name: "v2 memory.max", version: 2, dir: "/sys/fs/cgroup/user.slice/job", limit: 500 * mb,
			budget: 500*mb - 20*mb,
			files: map[string]string{
				"proc/self/cgroup":                            "0::/user.slice/job\n",
				"proc/self/mountinfo":                         v2Mounts,
				"sys/fs/cgroup/user.slice/job/memory.max":     itoa(500*mb) + "\n",
				"sys/fs/cgroup/user.slice/job/memory.current": itoa(100*mb) + "\n",
				"sys/fs/cgroup/user.slice/job/memory.stat":    "anon 20\nfile 80\ninactive_file " + itoa(50*mb) + "\nactive_file " + itoa(30*mb) + "\nfile_dirty 0\n",
				"sys/fs/cgroup/user.slice/memory.max":         "max\n",
			}},
		{name: "v2 inside a namespace: the mount shows the group itself", version: 2, dir: "/sys/fs/cgroup", limit: 256 * mb,
			budget: 256*mb - 6*mb,
			files: map[string]string{
				"proc/self/cgroup":                 "0::/\n",
				"proc/self/mountinfo":              "25 30 0:23 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"sys/fs/cgroup/memory.max":         itoa(256*mb) + "\n",
				"sys/fs/cgroup/memory.current":     itoa(6*mb) + "\n",
				"sys/fs/cgroup/memory.stat":        "inactive_file 0\n",
				"sys/fs/cgroup/cgroup.controllers": "memory\n",
			}},
		{name: "no limit anywhere", noCgroups: true,
			files: map[string]string{
				"proc/self/cgroup":                           "4:memory:/\n0::/\n",
				"proc/self/mountinfo":                        v1Mounts,
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			}},
		{name: "v2 without the memory controller", noCgroups: true,
			files: map[string]string{
				"proc/self/cgroup":    "0::/a\n",
				"proc/self/mountinfo": v2Mounts,
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.files["proc/meminfo"] = meminfo
			m, err := readMemory(writeTree(t, c.files))
			if err != nil {
				t.Fatal(err)
			}
			if m.TotalBytes != 24683584*1024 || m.AvailableBytes != 21154084*1024 {
				t.Errorf("total %d, available %d", m.TotalBytes, m.AvailableBytes)
			}
			if c.noCgroups {
				if m.Cgroup != nil || m.BudgetBytes != m.AvailableBytes {
					t.Errorf("cgroup %+v, budget %d", m.Cgroup, m.BudgetBytes)
				}
				return
			}
			cg := m.Cgroup
			if cg == nil {
				t.Fatal("no cgroup found")
			}
			if cg.Version != c.version || cg.Dir != c.dir || cg.LimitBytes != c.limit {
				t.Errorf("cgroup %+v, want v%d %s limit %d", cg, c.version, c.dir, c.limit)
			}
			if m.BudgetBytes != c.budget {
				t.Errorf("budget %d MB, want %d MB", m.BudgetBytes/mb, c.budget/mb)
			}
		})
	}
}

func TestMemoryErrors(t *testing.T) {
	if _, err := readMemory(t.TempDir()); err == nil {
		t.Error("no /proc/meminfo: no error")
	}
	root := writeTree(t, map[string]string{
		"proc/meminfo":        meminfo,
		"proc/self/cgroup":    "4:memory:/a\n",
		"proc/self/mountinfo": v1Mounts,
		"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "lots\n",
	})
	if _, err := readMemory(root); err == nil {
		t.Error("a limit that is not a number: no error")
	}
}

// The real machine: whatever it has, the budget is positive and no more than available.
func TestReadMemory(t *testing.T) {
	m, err := ReadMemory()
	if err != nil {
		t.Skipf("no memory figures here: %v", err)
	}
	if m.TotalBytes <= 0 || m.BudgetBytes <= 0 || m.BudgetBytes > m.AvailableBytes || m.AvailableBytes > m.TotalBytes {
		t.Errorf("%+v", m)
	}
	t.Logf("total %s, available %s, budget %s, cgroup %+v", HumanBytes(m.TotalBytes), HumanBytes(m.AvailableBytes), HumanBytes(m.BudgetBytes), m.Cgroup)
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("got %q", got)
	}
}
