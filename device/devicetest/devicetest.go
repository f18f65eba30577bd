// Package devicetest is the conformance suite for device backends: Run launches every
// registered kernel that has test cases on a backend and compares the results, bit for bit,
// with the kernel's twin on the CPU backend.
//
// Each case names its buffers and their initial bytes. Every buffer is allocated with guard
// zones of GuardBytes on both sides, filled with a sentinel pattern; after the launch the
// guards must be intact, buffers not marked Out must be unchanged, and buffers marked Out
// must equal the twin's bit for bit. Cases are registered per kernel entry (Register); this
// package registers cases for the kernels in device/kernels (the cases_*.go files).
//
// A second set of cases has the shapes of real models (RegisterReal, realsizes.go): launches
// as large as a real layer's, which only a real device runs in reasonable time. Run checks
// them instead of the small ones when given the RealSizes option.
package devicetest

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"verity/device"
	"verity/device/cpu"
)

// GuardBytes is the size of the guard zone before and after every buffer.
const GuardBytes = 256

// Buffer is one device buffer of a test case.
type Buffer struct {
	Name string
	Data []byte // initial contents
	// Out marks a buffer the kernel writes: it is compared with the twin's after the launch.
	// Any other buffer must come back unchanged.
	Out bool
}

// Case is one launch of a kernel.
type Case struct {
	Name    string
	Buffers []Buffer
	// Args builds the kernel's argument struct from the device addresses of Buffers, in order.
	Args func(p []device.Ptr) any
}

var (
	mu        sync.Mutex
	cases     = map[string]func() []Case{}
	realCases = map[string]func() []Case{}

	// genMu serialises making real-shape cases; shapesOnly (under it) makes their random
	// contents empty (RealShapes).
	genMu      sync.Mutex
	shapesOnly bool
)

// Register adds the test cases of a kernel entry (at init time). It panics on a duplicate.
func Register(entry string, cs func() []Case) { register(cases, entry, cs) }

// RegisterReal adds cases of real model shapes for a kernel entry (at init time). It panics
// on a duplicate.
func RegisterReal(entry string, cs func() []Case) { register(realCases, entry, cs) }

func register(set map[string]func() []Case, entry string, cs func() []Case) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := set[entry]; dup {
		panic("devicetest: cases for " + entry + " registered twice")
	}
	set[entry] = cs
}

// Cases returns the test cases of a kernel entry (nil if it has none).
func Cases(entry string) []Case { return casesOf(cases, entry) }

// RealCases returns the real-shape cases of a kernel entry (nil if it has none). Their
// buffers are large: up to a few hundred megabytes each.
func RealCases(entry string) []Case {
	genMu.Lock()
	defer genMu.Unlock()
	return casesOf(realCases, entry)
}

// Shape is a real-shape case without its buffers: its name and the launch's arguments, built
// from placeholder addresses.
type Shape struct {
	Name string
	Args any
}

// RealShapes returns the real-shape cases of a kernel entry as shapes only (nil if it has
// none), cheaply: the buffers' contents are never made.
func RealShapes(entry string) []Shape {
	genMu.Lock()
	defer genMu.Unlock()
	shapesOnly = true
	defer func() { shapesOnly = false }()
	var out []Shape
	for _, c := range casesOf(realCases, entry) {
		ptrs := make([]device.Ptr, len(c.Buffers))
		for i := range ptrs {
			ptrs[i] = device.Ptr(uint64(i+1) << 40)
		}
		out = append(out, Shape{Name: c.Name, Args: c.Args(ptrs)})
	}
	return out
}

func casesOf(set map[string]func() []Case, entry string) []Case {
	mu.Lock()
	f := set[entry]
	mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// Entries returns the kernel entries that have test cases, sorted.
func Entries() []string { return entries(cases) }

// RealEntries returns the kernel entries that have real-shape cases, sorted.
func RealEntries() []string { return entries(realCases) }

func entries(set map[string]func() []Case) []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// Option changes what Run checks.
type Option func(*config)

type config struct {
	real bool
}

// RealSizes makes Run check the real-shape cases (RegisterReal) instead of the small ones,
// against a twin on every CPU. They are for real devices: the PTX interpreter would take
// hours over them.
func RealSizes() Option { return func(c *config) { c.real = true } }

// Stats counts what Run compared.
type Stats struct {
	Kernels  int   `json:"kernels"`  // kernels with cases that ran on the backend
	Skipped  int   `json:"skipped"`  // kernels the backend does not support (device.ErrUnsupported)
	Launches int   `json:"launches"` // cases launched, one launch and one shape each
	Failed   int   `json:"failed"`   // cases that differed from the twin or failed to run
	Bytes    int64 `json:"bytes"`    // output bytes compared with the twin's
	// Lost names the kernel and case at which the device was lost (device.ErrDeviceLost: an
	// illegal address, a trap), after which Run stopped; "" if it was not.
	Lost    string `json:"lost,omitempty"`
	NotRun  int    `json:"not_run,omitempty"` // kernels with cases left unchecked after the loss
	LostErr string `json:"lost_error,omitempty"`
}

// Run checks every registered kernel with test cases on backend b against its twin and
// returns what it compared. Kernels the backend does not support (device.ErrUnsupported)
// are skipped, visibly. A launch that loses the device (device.ErrDeviceLost) stops the run:
// that case fails, naming the kernel and the case, and every later kernel is left unchecked
// (counted in Stats.NotRun), since nothing more can run on the device.
func Run(t *testing.T, b device.Backend, opts ...Option) Stats {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	set, workers := Cases, 1
	if cfg.real {
		set, workers = RealCases, 0
	}
	var st Stats
	ran := 0
	for _, k := range device.Kernels() {
		cs := set(k.Entry())
		if cs == nil {
			continue
		}
		ran++
		if st.Lost != "" {
			st.NotRun++
			continue
		}
		t.Run(k.Entry(), func(t *testing.T) {
			for i, c := range cs {
				n, err := check(b, workers, k, c)
				cs[i] = Case{} // let a large case's buffers go
				if errors.Is(err, device.ErrDeviceLost) {
					st.Failed++
					st.Lost = k.Entry() + " case " + c.Name
					st.LostErr = err.Error()
					t.Fatalf("case %s: the device was lost: %v", c.Name, err)
				}
				if errors.Is(err, device.ErrUnsupported) {
					st.Skipped++
					t.Skipf("%s: %v", b.Name(), err)
				}
				if i == 0 {
					st.Kernels++
				}
				st.Launches++
				st.Bytes += n
				if err != nil {
					st.Failed++
					t.Errorf("case %s: %v", c.Name, err)
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("devicetest: no kernel has test cases")
	}
	if st.Lost != "" {
		t.Errorf("devicetest: stopped at %s, which lost the device; %d kernels with cases not checked", st.Lost, st.NotRun)
	}
	return st
}

// Check runs one case of kernel k on backend b and on the CPU twin and compares them.
func Check(b device.Backend, k device.Spec, c Case) error {
	_, err := check(b, 1, k, c)
	return err
}

// Outputs runs one case of kernel k on backend b and returns the bytes of every buffer after
// the launch, guard zones checked and removed, in the order of c.Buffers: what Check compares
// with the twin, for comparing two backends with each other.
func Outputs(b device.Backend, k device.Spec, c Case) ([][]byte, error) {
	got, err := launch(b, k, c)
	if err != nil {
		return nil, err
	}
	for i, buf := range c.Buffers {
		if err := checkGuards(got[i], buf.Name); err != nil {
			return nil, err
		}
		got[i] = got[i][GuardBytes : len(got[i])-GuardBytes]
	}
	return got, nil
}

// Compare reports the first difference between two buffers' bytes (nil if equal): the word,
// its bits and float32 values, their ulp distance and how many words differ.
func Compare(got, want []byte) error { return compare(got, want) }

// check is Check with a twin of workers threads (0: one per CPU); it also returns the number
// of output bytes compared.
func check(b device.Backend, workers int, k device.Spec, c Case) (int64, error) {
	twin := cpu.New(workers)
	defer twin.Close()
	want, err := launch(twin, k, c)
	if err != nil {
		return 0, fmt.Errorf("twin: %w", err)
	}
	got, err := launch(b, k, c)
	if err != nil {
		return 0, err
	}
	var compared int64
	for i, buf := range c.Buffers {
		if err := checkGuards(got[i], buf.Name); err != nil {
			return compared, err
		}
		if err := checkGuards(want[i], buf.Name); err != nil {
			return compared, fmt.Errorf("twin: %w", err)
		}
		g, w := got[i][GuardBytes:len(got[i])-GuardBytes], want[i][GuardBytes:len(want[i])-GuardBytes]
		if !buf.Out {
			if err := compare(g, buf.Data); err != nil {
				return compared, fmt.Errorf("read-only buffer %s was modified: %w", buf.Name, err)
			}
			continue
		}
		compared += int64(len(w))
		if err := compare(g, w); err != nil {
			return compared, fmt.Errorf("output %s differs from the twin: %w", buf.Name, err)
		}
	}
	return compared, nil
}

// launch allocates the case's guarded buffers on b, runs k and returns every buffer's bytes
// (guards included).
func launch(b device.Backend, k device.Spec, c Case) ([][]byte, error) {
	ptrs := make([]device.Ptr, len(c.Buffers))
	for i, buf := range c.Buffers {
		n := len(buf.Data) + 2*GuardBytes
		p, err := b.Alloc(int64(n))
		if err != nil {
			return nil, err
		}
		defer b.Free(p)
		init := make([]byte, n)
		fillGuard(init[:GuardBytes])
		fillGuard(init[n-GuardBytes:])
		copy(init[GuardBytes:], buf.Data)
		if err := b.Write(p, init); err != nil {
			return nil, err
		}
		ptrs[i] = p + GuardBytes
	}
	if err := b.Launch(k, c.Args(ptrs)); err != nil {
		return nil, err
	}
	if err := b.Sync(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(c.Buffers))
	for i, buf := range c.Buffers {
		out[i] = make([]byte, len(buf.Data)+2*GuardBytes)
		if err := b.Read(out[i], ptrs[i]-GuardBytes); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sentinel is the guard pattern: not a plausible float, int or zero.
func sentinel(i int) byte { return byte(0xA5 ^ i*7) }

func fillGuard(b []byte) {
	for i := range b {
		b[i] = sentinel(i)
	}
}

func checkGuards(b []byte, name string) error {
	for i := 0; i < GuardBytes; i++ {
		if b[i] != sentinel(i) {
			return fmt.Errorf("buffer %s: guard byte %d before the buffer was overwritten", name, GuardBytes-i)
		}
		j := len(b) - GuardBytes + i
		if b[j] != sentinel(i) {
			return fmt.Errorf("buffer %s: guard byte %d after the buffer was overwritten", name, i)
		}
	}
	return nil
}

// compare reports the first differing 4-byte word (or byte) of got and want, both values as
// hex bits and as float32, their ulp distance, the neighbours, and how many words differ.
func compare(got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("length %d, want %d", len(got), len(want))
	}
	first, count := -1, 0
	for i := 0; i+4 <= len(got); i += 4 {
		if string(got[i:i+4]) != string(want[i:i+4]) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	if tail := len(got) &^ 3; string(got[tail:]) != string(want[tail:]) {
		if first < 0 {
			first = tail
		}
		count++
	}
	if first < 0 {
		return nil
	}
	if first+4 > len(got) {
		return fmt.Errorf("byte %d: %#02x, want %#02x", first, got[first], want[first])
	}
	var sb strings.Builder
	word := func(b []byte, i int) uint32 {
		return uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
	}
	g, w := word(got, first), word(want, first)
	fmt.Fprintf(&sb, "word %d (byte %d): %#08x (%g), want %#08x (%g), %d ulp apart; %d of %d words differ",
		first/4, first, g, math.Float32frombits(g), w, math.Float32frombits(w), ulps(g, w), count, len(got)/4)
	for i := max(first-8, 0); i < min(first+12, len(got)-3); i += 4 {
		mark := "  "
		if word(got, i) != word(want, i) {
			mark = "NOT OK"
		}
		fmt.Fprintf(&sb, "\n\t[%d] %#08x %-14g want %#08x %-14g %s", i/4, word(got, i), math.Float32frombits(word(got, i)),
			word(want, i), math.Float32frombits(word(want, i)), mark)
	}
	return errors.New(sb.String())
}

// ulps is the distance between two float32 bit patterns in units in the last place.
func ulps(a, b uint32) int64 {
	key := func(x uint32) int64 {
		if x&0x80000000 != 0 {
			return -int64(x & 0x7fffffff)
		}
		return int64(x)
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return d
}
