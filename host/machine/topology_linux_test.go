package machine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A sysfs tree of two packages of two cores with two threads each, cpu5 offline, and cpu0's
// caches: the counts are of online processors and distinct (package, core) pairs, the sizes
// cpu0's data/unified L2 and L3.
func TestOSTopology(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("online", "0-4,6-7")
	for cpu := 0; cpu < 8; cpu++ {
		dir := filepath.Join("cpu"+strconv.Itoa(cpu), "topology")
		write(filepath.Join(dir, "physical_package_id"), strconv.Itoa(cpu/4))
		write(filepath.Join(dir, "core_id"), strconv.Itoa(cpu%2))
	}
	for i, c := range []struct{ level, kind, size string }{{"1", "Data", "48K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "1024K"}, {"3", "Unified", "32M"}} {
		dir := filepath.Join("cpu0", "cache", "index"+strconv.Itoa(i))
		write(filepath.Join(dir, "level"), c.level)
		write(filepath.Join(dir, "type"), c.kind)
		write(filepath.Join(dir, "size"), c.size)
	}
	old := sysfsRoot
	sysfsRoot = root
	defer func() { sysfsRoot = old }()
	logical, physical, l2, l3 := osTopology()
	if logical != 7 || physical != 4 || l2 != 1<<20 || l3 != 32<<20 {
		t.Errorf("osTopology = %d logical, %d physical, L2 %d, L3 %d; want 7, 4, %d, %d", logical, physical, l2, l3, 1<<20, 32<<20)
	}
	for _, c := range []struct {
		in   string
		want int64
	}{{"512K", 512 << 10}, {"32M", 32 << 20}, {"1G", 1 << 30}, {"4096", 4096}, {"", 0}, {"x", 0}, {"-1K", 0}} {
		if got := parseCacheSize(c.in); got != c.want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	sysfsRoot = filepath.Join(root, "none")
	if logical, _, _, _ := osTopology(); logical != 0 {
		t.Errorf("no sysfs: %d logical processors, want 0", logical)
	}
}
