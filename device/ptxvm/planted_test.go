package ptxvm_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"verity/device"
	"verity/device/devicetest"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/ptx"
)

// Planted bugs: a copy of a committed kernel with one deliberate mistake must fail the
// conformance check (or fault in the interpreter), with a message that points at it.

// plant returns the PTX of module stem with the first match of re inside entry replaced.
func plant(t *testing.T, stem, entry string, re *regexp.Regexp, repl string) string {
	t.Helper()
	src, err := ptx.Module(stem)
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(src, ".entry "+entry+"(")
	if start < 0 {
		t.Fatalf("module %s has no entry %s", stem, entry)
	}
	end := start + strings.Index(src[start:], "\n}\n")
	body := src[start:end]
	loc := re.FindStringIndex(body)
	if loc == nil {
		t.Fatalf("%s: the pattern %q no longer occurs in the committed PTX; update the planted bug", entry, re)
	}
	edited := body[:loc[0]] + re.ReplaceAllString(body[loc[0]:loc[1]], repl) + body[loc[1]:]
	return src[:start] + edited + src[end:]
}

func spec(t *testing.T, entry string) device.Spec {
	for _, k := range device.Kernels() {
		if k.Entry() == entry {
			return k
		}
	}
	t.Fatalf("no kernel %s", entry)
	return nil
}

// checkAll runs every case of entry on a backend with the edited module and returns the
// first error.
func checkAll(t *testing.T, stem, entry, src string) error {
	b := ptxvm.New(ptxvm.Options{Source: func(s string) (string, error) {
		if s == stem {
			return src, nil
		}
		return ptx.Module(s)
	}})
	defer b.Close()
	k := spec(t, entry)
	for _, c := range devicetest.Cases(entry) {
		if err := devicetest.Check(b, k, c); err != nil {
			return err
		}
	}
	return nil
}

// The bounds check i < n becomes i <= n: the extra thread reads past its inputs and writes
// past its output. The guard zones catch the write.
func TestPlantedOffByOne(t *testing.T) {
	src := plant(t, "elementwise", "add_f32", regexp.MustCompile(`setp\.ge\.s64`), "setp.gt.s64")
	err := checkAll(t, "elementwise", "add_f32", src)
	if err == nil || !strings.Contains(err.Error(), "buffer Y: guard byte") || !strings.Contains(err.Error(), "after the buffer was overwritten") {
		t.Fatalf("got %v, want the guard after Y overwritten", err)
	}
	t.Log(err)
	// without guard zones the interpreter's bounds check stops it
	b := ptxvm.New(ptxvm.Options{Source: func(string) (string, error) { return src, nil }})
	defer b.Close()
	n := 100
	p := make([]device.Ptr, 3)
	for i := range p {
		p[i], _ = b.Alloc(int64(4 * n))
	}
	err = b.Launch(spec(t, "add_f32"), kernelsBinary(p, n))
	var e *ptxvm.ExecError
	if !errors.As(err, &e) || e.Thread[0] != uint32(n) || !strings.Contains(e.Msg, "0 bytes past the end of the 400-byte allocation") {
		t.Fatalf("got %v, want thread %d faulting just past an input", err, n)
	}
	t.Log(err)
}

// Removing the barrier between the shared-memory writes and reads of argmax's cross-warp
// combine is a race the interpreter reports.
func TestPlantedMissingBarrier(t *testing.T) {
	src := plant(t, "argmax", "argmax_f32", regexp.MustCompile(`bar\.sync\s+0;`), "// barrier removed")
	err := checkAll(t, "argmax", "argmax_f32", src)
	var e *ptxvm.ExecError
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "shared memory race") {
		t.Fatalf("got %v, want a shared memory race", err)
	}
	t.Log(err)
}

// Rope's x·c − y·s rounds both products; fusing the second into an fma (one rounding fewer)
// changes some outputs by an ulp, and the comparison with the twin shows it.
func TestPlantedFusedMultiplyAdd(t *testing.T) {
	re := regexp.MustCompile(`mul\.rn\.f32\s+(%f\d+), (%f\d+), (%f\d+);(\s+)sub\.rn\.f32\s+(%f\d+), (%f\d+), (%f\d+);`)
	src := plant(t, "rope", "rope_f32", re, "neg.f32 ${1}, ${2};${4}fma.rn.f32 ${5}, ${1}, ${3}, ${6};")
	if !strings.Contains(src, "fma.rn.f32") {
		t.Fatal("the edit did not apply")
	}
	err := checkAll(t, "rope", "rope_f32", src)
	if err == nil || !strings.Contains(err.Error(), "differs from the twin") || !strings.Contains(err.Error(), "1 ulp apart") {
		t.Fatalf("got %v, want a 1-ulp difference from the twin", err)
	}
	t.Log(err)
}

func kernelsBinary(p []device.Ptr, n int) any {
	return kernels.BinaryArgs{A: p[0], B: p[1], Y: p[2], N: int32(n)}
}
