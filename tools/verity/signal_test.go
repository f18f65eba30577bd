package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"verity/device/dtype"
	"verity/host/gguf"
)

// TestMain lets a test run the CLI as a child process (the test binary itself, with
// VERITY_TEST_CLI set), for what only a real process shows: signals and exit statuses.
func TestMain(m *testing.M) {
	if os.Getenv("VERITY_TEST_CLI") == "1" {
		os.Args = append([]string{"verity"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// An interrupted quantize leaves neither its output nor a temporary file, and ends with the
// shell's status for SIGINT; an in-place quantize keeps the file's mode.
func TestQuantizeInterrupted(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.gguf")
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.Str("llama"))
	const rows, cols = 4096, 4096 // 64 MiB of F32: long enough to interrupt
	if err := w.AddTensor("blk.0.ffn_up.weight", dtype.F32, []int64{cols, rows}, make([]byte, rows*cols*4)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(in); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gguf")
	cmd := exec.Command(os.Args[0], "quantize", in, out, "--type", "q4_K", "--threads", "1", "-q")
	cmd.Env = append(os.Environ(), "VERITY_TEST_CLI=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the temporary output to appear, then interrupt.
	deadline := time.Now().Add(30 * time.Second)
	for !hasTemp(t, dir) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no temporary file appeared")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("quantize was not interrupted: %v", err)
	}
	if ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Errorf("exit status %d, want %d", ee.ExitCode(), 128+int(syscall.SIGINT))
	}
	if hasTemp(t, dir) {
		t.Error("a temporary file was left behind")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output exists after the interrupt: %v", err)
	}

	// In place, on a file only its owner may read: the mode stays.
	if err := os.Chmod(in, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "quantize", in, in, "--type", "q8_0", "-q"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("in-place quantize changed the mode to %v", fi.Mode().Perm())
	}
}

func hasTemp(t *testing.T, dir string) bool {
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.Contains(de.Name(), ".tmp-") {
			return true
		}
	}
	return false
}
