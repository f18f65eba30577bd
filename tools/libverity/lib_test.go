package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"verity/fixtures"
)

// The library is built once per test run, into a temporary directory.
var lib struct {
	once      sync.Once
	dir, path string
	skip, err string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}

// buildLib builds libverity.so with go build -buildmode=c-shared (skipping the test where
// there is no C compiler, which cgo needs) and returns its directory.
func buildLib(t *testing.T) string {
	t.Helper()
	lib.once.Do(func() {
		if _, err := exec.LookPath("gcc"); err != nil {
			lib.skip = "no gcc: the C library needs cgo and a C compiler"
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			lib.skip = "no go command to build the library with"
			return
		}
		if lib.dir, err = os.MkdirTemp("", "libverity-test-"); err != nil {
			lib.err = err.Error()
			return
		}
		lib.path = filepath.Join(lib.dir, "libverity.so")
		cmd := exec.Command(gobin, "build", "-buildmode=c-shared", "-o", lib.path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			lib.err = "go build -buildmode=c-shared: " + err.Error() + "\n" + string(out)
		}
	})
	switch {
	case lib.skip != "":
		t.Skip(lib.skip)
	case lib.err != "":
		t.Fatal(lib.err)
	}
	return lib.dir
}

// fixtureFiles returns the models and adapter the C test and the Python example use.
func fixtureFiles(t *testing.T) (chatml, bos, adapter string) {
	t.Helper()
	var err error
	if chatml, err = fixtures.Path("tiny-qwen3-f32"); err != nil {
		t.Fatal(err)
	}
	if bos, err = fixtures.Path("tiny-phi3-f32"); err != nil {
		t.Fatal(err)
	}
	s, err := fixtures.Lookup("tiny-qwen3-f32")
	if err != nil {
		t.Fatal(err)
	}
	a, err := fixtures.LookupAdapter("lora-r8")
	if err != nil {
		t.Fatal(err)
	}
	if adapter, err = fixtures.AdapterPath(s, a); err != nil {
		t.Fatal(err)
	}
	return chatml, bos, adapter
}

// run runs a command with the library on its search path, failing the test on an error.
func run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib.dir, "VERITY_LIB="+lib.path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// The C test program (testdata/ctest.c) drives every function of verity.h, bad input
// included, and sessions on four threads at once, compiled with every warning an error.
func TestC(t *testing.T) {
	dir := buildLib(t)
	chatml, bos, adapter := fixtureFiles(t)
	bin := filepath.Join(dir, "ctest")
	run(t, 2*time.Minute, "gcc", "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-I", ".",
		"-o", bin, "testdata/ctest.c", "-L", dir, "-lverity", "-lpthread")
	out := run(t, 5*time.Minute, bin, chatml, bos, adapter)
	if !strings.Contains(out, ", 0 failures") {
		t.Fatal(out)
	}
	t.Log(strings.TrimSpace(out))
}

// The header compiles as C++ too.
func TestHeaderCxx(t *testing.T) {
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("no g++")
	}
	src := filepath.Join(t.TempDir(), "h.cc")
	if err := os.WriteFile(src, []byte("#include \"verity.h\"\nint main() { return verity_abi_version() == VERITY_ABI_VERSION ? 0 : 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-I", ".", "-fsyntax-only", src)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// pythonExample is the README's ctypes example: the python block of its C library section.
func pythonExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## C library\n")
	if !ok {
		t.Fatal("README.md has no C library section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md's C library section has no python example")
	}
	return m[1]
}

// The README's Python example runs as written, on a fixture.
func TestPythonExample(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	example := pythonExample(t)
	dir := buildLib(t)
	chatml, _, _ := fixtureFiles(t)
	file := filepath.Join(dir, "example.py")
	if err := os.WriteFile(file, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, 2*time.Minute, py, file, chatml)
	for _, want := range []string{"qwen3", "tokens", "finish"} {
		if !strings.Contains(out, want) {
			t.Errorf("the example's output does not say %q:\n%s", want, out)
		}
	}
	t.Log(out)
}
