// Package devicetest is the conformance suite for device backends: Run launches every
// registered kernel that has test cases on a backend and compares the results, bit for bit,
// with the kernel's twin on the CPU backend.
//
// Each case names its buffers and their initial bytes. Every buffer is allocated with guard
// zones of GuardBytes on both sides, filled with a sentinel pattern; after the launch the
// guards must be intact, buffers not marked Out must be unchanged, and buffers marked Out
// must equal the twin's bit for bit. Cases are registered per kernel entry (Register); this
// package registers cases for the kernels in device/kernels (the cases_*.go files).
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
	mu    sync.Mutex
	cases = map[string]func() []Case{}
)

// Register adds the test cases of a kernel entry (at init time). It panics on a duplicate.
func Register(entry string, cs func() []Case) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := cases[entry]; dup {
		panic("devicetest: cases for " + entry + " registered twice")
	}
	cases[entry] = cs
}

// Cases returns the test cases of a kernel entry (nil if it has none).
func Cases(entry string) []Case {
	mu.Lock()
	f := cases[entry]
	mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// Entries returns the kernel entries that have test cases, sorted.
func Entries() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(cases))
	for e := range cases {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// Run checks every registered kernel with test cases on backend b against its twin. Kernels
// the backend does not support (device.ErrUnsupported) are skipped, visibly.
func Run(t *testing.T, b device.Backend) {
	ran := 0
	for _, k := range device.Kernels() {
		cs := Cases(k.Entry())
		if cs == nil {
			continue
		}
		ran++
		t.Run(k.Entry(), func(t *testing.T) {
			for _, c := range cs {
				err := Check(b, k, c)
				if errors.Is(err, device.ErrUnsupported) {
					t.Skipf("%s: %v", b.Name(), err)
				}
				if err != nil {
					t.Errorf("case %s: %v", c.Name, err)
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("devicetest: no kernel has test cases")
	}
}

// Check runs one case of kernel k on backend b and on the CPU twin and compares them.
func Check(b device.Backend, k device.Spec, c Case) error {
	twin := cpu.New(1)
	defer twin.Close()
	want, err := launch(twin, k, c)
	if err != nil {
		return fmt.Errorf("twin: %w", err)
	}
	got, err := launch(b, k, c)
	if err != nil {
		return err
	}
	for i, buf := range c.Buffers {
		if err := checkGuards(got[i], buf.Name); err != nil {
			return err
		}
		if err := checkGuards(want[i], buf.Name); err != nil {
			return fmt.Errorf("twin: %w", err)
		}
		g, w := got[i][GuardBytes:len(got[i])-GuardBytes], want[i][GuardBytes:len(want[i])-GuardBytes]
		if !buf.Out {
			if err := compare(g, buf.Data); err != nil {
				return fmt.Errorf("read-only buffer %s was modified: %w", buf.Name, err)
			}
			continue
		}
		if err := compare(g, w); err != nil {
			return fmt.Errorf("output %s differs from the twin: %w", buf.Name, err)
		}
	}
	return nil
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
