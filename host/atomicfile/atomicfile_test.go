package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("destination exists before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // after Commit: nothing
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello" {
		t.Fatalf("after Commit: %q, %v", b, err)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}

	g, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("partial"))
	g.Abort()
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Fatalf("Abort changed the destination: %q", b)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("files left: %v", got)
	}
}

func TestMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		existing os.FileMode // 0: no file there before
		mode     os.FileMode
		want     os.FileMode
	}{
		{"new file gets mode less umask", 0, 0o666, 0o666 &^ umask()},
		{"new file 0644", 0, 0o644, 0o644 &^ umask()},
		{"rewrite keeps 0600", 0o600, 0o644, 0o600},
		{"rewrite keeps 0755", 0o755, 0o644, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(int(tc.existing))+"-"+strconv.Itoa(int(tc.mode)))
			if tc.existing != 0 {
				if err := os.WriteFile(path, []byte("old"), tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			f, err := Create(path, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Commit(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Fatalf("mode %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAbortAll(t *testing.T) {
	dir := t.TempDir()
	var fs []*File
	for i := range 3 {
		f, err := Create(filepath.Join(dir, "f"+strconv.Itoa(i)), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	if err := fs[0].Commit(); err != nil {
		t.Fatal(err)
	}
	AbortAll()
	if got := entries(t, dir); len(got) != 1 || got[0] != "f0" {
		t.Fatalf("after AbortAll: %v, want [f0]", got)
	}
	if _, err := fs[1].Write([]byte("x")); err == nil {
		t.Fatal("a write after AbortAll succeeded")
	}
}

func TestOwnerPID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{".model.gguf.tmp-1234-5678", 1234, true},
		{".a.tmp-b.tmp-42-9", 42, true},
		{"model.gguf.tmp-1234-5678", 0, false}, // not hidden
		{".model.gguf.tmp-1234", 0, false},
		{".model.gguf.tmp-1234-", 0, false},
		{".model.gguf.tmp--5", 0, false},
		{".model.gguf.tmp-x-5", 0, false},
		{".model.gguf.tmp-0-5", 0, false},
		{".model.gguf", 0, false},
	} {
		pid, ok := ownerPID(tc.name)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("ownerPID(%q) = %d, %v; want %d, %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	// A process that has ended: its pid names a dead owner.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run a child process:", err)
	}
	dead := cmd.Process.Pid
	if alive(dead) {
		t.Skipf("pid %d was reused already", dead)
	}
	files := map[string]bool{ // name → removed by Sweep
		"." + "m.gguf" + tmpMarker + strconv.Itoa(dead) + "-1":        true,
		"." + "m.gguf" + tmpMarker + strconv.Itoa(os.Getpid()) + "-2": false,
		"m.gguf":                            false,
		"." + "x" + tmpMarker + "notapid-3": false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Sweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Sweep removed %d files, want 1", n)
	}
	for name, removed := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if removed != os.IsNotExist(err) {
			t.Errorf("%s: removed=%v, want %v", name, os.IsNotExist(err), removed)
		}
	}
	if n, err := Sweep(filepath.Join(dir, "absent")); n != 0 || err != nil {
		t.Errorf("Sweep of a missing directory: %d, %v", n, err)
	}
}
