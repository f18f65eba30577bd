// Package machine measures the machine Verity runs on: its CPU (cores, caches and SIMD
// features, by cpuid), its memory (total, available, and the limit of the process's control
// group, v1 or v2: a process in a 500 MB cgroup has a 500 MB budget), the sequential read speed
// of a model file's disk (unbuffered, so that the page cache does not pass for the disk), the
// host's memory copy bandwidth, each GPU's memory, SMs and copy bandwidth (through the
// device.Backend seam), and rates of the CPU twin's kernels that host/plan measures.
//
// The slow measurements are made once and cached in a JSON file named by the machine's
// identity (host name, machine id, CPU model and memory), under $VERITY_CACHE/machine or the
// user cache directory; the memory is measured afresh every time, since it changes.
package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/cpuid/v2"

	"verity/device/kernels"
	"verity/host/atomicfile"
)

// CPU describes the host's processor.
type CPU struct {
	Model         string   `json:"model"`
	Vendor        string   `json:"vendor"`
	PhysicalCores int      `json:"physical_cores"` // 0 when cpuid cannot tell
	LogicalCores  int      `json:"logical_cores"`
	GoMaxProcs    int      `json:"gomaxprocs"`
	Features      []string `json:"features"`  // the SIMD features Verity's CPU paths care about
	L2Bytes       int64    `json:"l2_bytes"`  // per core; 0 when unknown
	L3Bytes       int64    `json:"l3_bytes"`  // shared; 0 when unknown
	Twin          string   `json:"twin_path"` // the CPU twin's vector path (kernels.TwinPath)
}

// Copy is a measured host memory copy rate.
type Copy struct {
	Threads     int     `json:"threads"`
	BytesPerSec float64 `json:"bytes_per_s"` // reads and writes: 2·n per copy of n
}

// Disk is a measured sequential read speed of one file system's device.
type Disk struct {
	Device uint64 `json:"device"` // st_dev of the file measured
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"` // how much was read
	// BytesPerSec is the rate a streaming model's prefetcher reads at (each chunk asked for
	// whole, then read), FaultBytesPerSec the rate a model without it faults its pages in at
	// (sequential reads, the kernel's readahead alone).
	BytesPerSec      float64 `json:"bytes_per_s"`
	FaultBytesPerSec float64 `json:"fault_bytes_per_s,omitempty"`
	Method           string  `json:"method"` // read-ahead+drop-behind (through the page cache, dropped from it first), or buffered; drop-behind or O_DIRECT in older caches
}

// GPU is one device's memory, SMs and copy bandwidth.
type GPU struct {
	Backend     string `json:"backend"` // the backend's name
	MemoryBytes int64  `json:"memory_bytes"`
	SMs         int    `json:"sms,omitempty"`
	// CopyBytesPerSec is a device-to-device copy timed by the device (2·n per copy of n); 0
	// where the backend cannot time one.
	CopyBytesPerSec float64 `json:"copy_bytes_per_s,omitempty"`
}

// Facts are what is known of the machine: the cached measurements and the memory.
type Facts struct {
	Identity string    `json:"identity"`
	Host     string    `json:"host"`
	OS       string    `json:"os"`
	CPU      CPU       `json:"cpu"`
	Memory   Memory    `json:"memory"`
	Copies   []Copy    `json:"copy,omitempty"`
	Disks    []Disk    `json:"disks,omitempty"`
	GPUs     []GPU     `json:"gpus,omitempty"`
	Created  time.Time `json:"created"`
	// Rates are measured rates of this binary's CPU twin kernels (host/plan's), by key; they
	// are kept only for the executable that measured them (Build).
	Rates map[string]float64 `json:"twin_rates,omitempty"`
	Build string             `json:"build,omitempty"`
}

// Machine holds the Facts: the cached measurements, and the memory measured when it was
// loaded (Refresh measures it again). Its methods are safe for concurrent use; read its fields
// through Snapshot while other goroutines may measure.
type Machine struct {
	Facts
	mu   sync.Mutex
	file string // the cache file; "" when there is none
}

// Load returns the machine: the cached measurements when the cache has this machine's,
// else a fresh description, with the memory measured now. A missing or unreadable cache is
// not an error (nothing is cached then).
func Load() (*Machine, error) {
	m := describe()
	if dir, err := cacheDir(); err == nil {
		m.file = filepath.Join(dir, m.Identity+".json")
		if b, err := os.ReadFile(m.file); err == nil {
			var c Facts
			if json.Unmarshal(b, &c) == nil && c.Identity == m.Identity {
				m.Copies, m.Disks, m.GPUs, m.Created = c.Copies, c.Disks, c.GPUs, c.Created
				if c.Build == m.Build {
					m.Rates = c.Rates
				}
			}
		}
	}
	if err := m.Refresh(); err != nil {
		return m, err
	}
	return m, nil
}

// describe reads what cpuid and the system say, and the machine's identity.
func describe() *Machine {
	c := cpuid.CPU
	host, _ := os.Hostname()
	m := &Machine{Facts: Facts{Host: host, OS: runtime.GOOS + "/" + runtime.GOARCH, Created: time.Now().UTC(), Build: buildID()}}
	m.CPU = CPU{Model: strings.TrimSpace(c.BrandName), Vendor: c.VendorString, PhysicalCores: c.PhysicalCores,
		LogicalCores: c.LogicalCores, GoMaxProcs: runtime.GOMAXPROCS(0), Twin: kernels.TwinPath()}
	if c.Cache.L2 > 0 {
		m.CPU.L2Bytes = int64(c.Cache.L2)
	}
	if c.Cache.L3 > 0 {
		m.CPU.L3Bytes = int64(c.Cache.L3)
	}
	// the operating system's word where it has one: the processors this machine really has
	if logical, physical, l2, l3 := osTopology(); logical > 0 {
		m.CPU.LogicalCores = logical
		if physical > 0 {
			m.CPU.PhysicalCores = physical
		}
		if l2 > 0 {
			m.CPU.L2Bytes = l2
		}
		if l3 > 0 {
			m.CPU.L3Bytes = l3
		}
	}
	for _, f := range []struct {
		id   cpuid.FeatureID
		name string
	}{
		{cpuid.SSE4, "SSE4.1"}, {cpuid.AVX, "AVX"}, {cpuid.AVX2, "AVX2"}, {cpuid.FMA3, "FMA"},
		{cpuid.F16C, "F16C"}, {cpuid.AVX512F, "AVX-512F"}, {cpuid.AVX512BW, "AVX-512BW"},
		{cpuid.AVX512VNNI, "AVX-512VNNI"}, {cpuid.AVX512BF16, "AVX-512BF16"}, {cpuid.AVXVNNI, "AVX-VNNI"},
		{cpuid.ASIMD, "NEON"}, {cpuid.ASIMDDP, "NEON-dotprod"},
	} {
		if c.Supports(f.id) {
			m.CPU.Features = append(m.CPU.Features, f.name)
		}
	}
	total := int64(0)
	if mem, err := ReadMemory(); err == nil {
		total = mem.TotalBytes
	}
	id, _ := os.ReadFile("/etc/machine-id")
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%d/%d/%d\n%d\n%d\n%s\n", host, strings.TrimSpace(string(id)), m.CPU.Model,
		c.Family, c.Model, c.Stepping, m.CPU.LogicalCores, total>>20, m.OS)
	m.Identity = hex.EncodeToString(h.Sum(nil))[:16]
	return m
}

// buildID names the executable, so that kernel rates measured by one build are not taken
// for another's: its VCS revision when it has one, else its size and modification time.
func buildID() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" && !dirty {
			return rev
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	st, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d", filepath.Base(exe), st.Size(), st.ModTime().UnixNano())
}

// cacheDir is $VERITY_CACHE/machine, else verity/machine under the user cache directory.
func cacheDir() (string, error) {
	if d := os.Getenv("VERITY_CACHE"); d != "" {
		return filepath.Join(d, "machine"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "verity", "machine"), nil
}

// Refresh measures the memory again.
func (m *Machine) Refresh() error {
	mem, err := ReadMemory()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return err
	}
	m.Memory = mem
	return nil
}

// Budget is the memory the process may still take, measured at the last Refresh.
func (m *Machine) Budget() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Memory.BudgetBytes
}

// save writes the cache file (atomically; a failure only means nothing is cached).
func (m *Machine) save() {
	if m.file == "" {
		return
	}
	b, err := json.MarshalIndent(&m.Facts, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(m.file), 0o755); err != nil {
		return
	}
	f, err := atomicfile.Create(m.file, 0o644)
	if err != nil {
		return
	}
	defer f.Abort()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return
	}
	f.Commit()
}

// CopyBandwidth is the host memory copy rate on threads goroutines (0: GOMAXPROCS), measured
// on first use (on buffers of at most 256 MB, and at most an eighth of the memory budget) and
// cached.
func (m *Machine) CopyBandwidth(threads int) float64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.Copies {
		if c.Threads == threads {
			return c.BytesPerSec
		}
	}
	n := int64(256 << 20)
	if b := m.Memory.BudgetBytes / 8; b > 0 && b < n {
		n = max(b, 8<<20)
	}
	bw := copyRate(int(n), threads, 5)
	m.Copies = append(m.Copies, Copy{Threads: threads, BytesPerSec: bw})
	m.save()
	return bw
}

// copyRate measures the host memory copy rate in bytes per second: workers goroutines each
// copy their own slice of a buffer much larger than the caches, repeatedly, and the best of
// several rounds counts (a copy reads and writes each byte, so 2·n bytes move per copy of n).
func copyRate(bytes int, workers int, rounds int) float64 {
	src := make([]byte, bytes)
	dst := make([]byte, bytes)
	for i := range src {
		src[i] = byte(i)
	}
	best := 0.0
	for r := 0; r < rounds; r++ {
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			lo, hi := bytes*w/workers, bytes*(w+1)/workers
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
		if bw := 2 * float64(bytes) / time.Since(start).Seconds(); bw > best {
			best = bw
		}
	}
	runtime.KeepAlive(dst)
	src, dst = nil, nil
	debug.FreeOSMemory() // hand the pages back: the probe must not stay in the process's memory
	return best
}

// readLimit bounds a read-speed measurement: enough bytes and time for a disk to stream.
const (
	readLimit  = 256 << 20
	readBudget = time.Second
)

// ReadSpeed is the sequential read speed of the device holding the file at path, measured
// on that file (readMethod: without the page cache's help) the first time a file of that
// device is asked about, and again when a larger file than the one measured can give a longer
// read, or the one cached was measured another way.
func (m *Machine) ReadSpeed(path string) (Disk, error) {
	dev := deviceOf(path)
	m.mu.Lock()
	i := slices.IndexFunc(m.Disks, func(d Disk) bool { return d.Device == dev })
	if i >= 0 && m.Disks[i].Method == readMethod { // one measured another way is measured again
		d := m.Disks[i]
		st, err := os.Stat(path)
		if d.Bytes >= readLimit || err != nil || st.Size() <= d.Bytes*2 {
			m.mu.Unlock()
			return d, nil
		}
	}
	m.mu.Unlock()
	d, err := measureRead(path, readLimit, readBudget)
	if err != nil {
		return Disk{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.IndexFunc(m.Disks, func(x Disk) bool { return x.Device == d.Device }); i >= 0 {
		m.Disks[i] = d
	} else {
		m.Disks = append(m.Disks, d)
	}
	m.save()
	return d, nil
}

// Rate returns the cached rate called key, measuring it with measure first if this build has
// none (host/plan's kernel rates).
func (m *Machine) Rate(key string, measure func() (float64, error)) (float64, error) {
	m.mu.Lock()
	if v, ok := m.Rates[key]; ok {
		m.mu.Unlock()
		return v, nil
	}
	m.mu.Unlock()
	v, err := measure()
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Rates == nil {
		m.Rates = map[string]float64{}
	}
	m.Rates[key] = v
	m.save()
	return v, nil
}

// RateGroup returns the cached rates of group (keys "group/name"), measuring them all with
// measure first if this build has none.
func (m *Machine) RateGroup(group string, measure func() (map[string]float64, error)) (map[string]float64, error) {
	prefix := group + "/"
	m.mu.Lock()
	out := map[string]float64{}
	for k, v := range m.Rates {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out[name] = v
		}
	}
	m.mu.Unlock()
	if len(out) > 0 {
		return out, nil
	}
	vs, err := measure()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Rates == nil {
		m.Rates = map[string]float64{}
	}
	for k, v := range vs {
		m.Rates[prefix+k] = v
	}
	m.save()
	return vs, nil
}

// SetGPU records a device's measurement (replacing an earlier one of the same backend).
func (m *Machine) SetGPU(g GPU) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.IndexFunc(m.GPUs, func(x GPU) bool { return x.Backend == g.Backend }); i >= 0 {
		m.GPUs[i] = g
	} else {
		m.GPUs = append(m.GPUs, g)
	}
	m.save()
}

// GPU returns the recorded measurement of the backend called name.
func (m *Machine) GPU(name string) (GPU, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.GPUs, func(x GPU) bool { return x.Backend == name })
	if i < 0 {
		return GPU{}, false
	}
	return m.GPUs[i], true
}

// Snapshot returns a copy of the machine's description, for printing.
func (m *Machine) Snapshot() Facts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := Facts{Identity: m.Identity, Host: m.Host, OS: m.OS, CPU: m.CPU, Memory: m.Memory,
		Copies: slices.Clone(m.Copies), Disks: slices.Clone(m.Disks), GPUs: slices.Clone(m.GPUs), Created: m.Created, Build: m.Build}
	if m.Memory.Cgroup != nil {
		cg := *m.Memory.Cgroup
		c.Memory.Cgroup = &cg
	}
	if len(m.Rates) > 0 {
		c.Rates = make(map[string]float64, len(m.Rates))
		for k, v := range m.Rates {
			c.Rates[k] = v
		}
	}
	return c
}

// HumanBytes writes n bytes in binary units: "800.0 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n), -1
	for (v >= unit || v <= -unit) && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}
