package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"verity/megakernel"
)

// The committed kernel table and megakernel/shared.go are what the kernel registry and the
// committed PTX give now.
func TestTableIsFresh(t *testing.T) {
	want, shared, err := Generate(matvecSource(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "ptx")
	for _, f := range []struct {
		path string
		want []byte
	}{{filepath.Join(dir, File), want}, {filepath.Join(dir, GoFile), GoSource(shared)}} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: run go generate ./ptx", f.path)
		}
	}
	if megakernel.SharedBytes != shared {
		t.Errorf("megakernel.SharedBytes is %d, the table needs %d", megakernel.SharedBytes, shared)
	}
}

func matvecSource(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "ptx", "src", "matvec.cu"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// A body's shared memory is its entry's shared struct, none for a matvec8 body in a plain
// form; the buffer is the largest of them.
func TestSharedIsTheLargestStruct(t *testing.T) {
	src := matvecSource(t)
	_, shared, err := Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := plainBodies(src)
	if err != nil {
		t.Fatal(err)
	}
	largest := 0
	for _, k := range megakernel.Kernels() {
		if plain[k.Entry()] {
			continue
		}
		n, err := entryShared(k)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, n)
	}
	if largest == 0 || shared < largest || shared >= largest+16 {
		t.Errorf("shared buffer of %d bytes for a largest struct of %d", shared, largest)
	}
}

// Every quantised matvec8 runs a plain form in the megakernel (the staged and MMA forms are the
// eager entries' alone): its body needs neither the thread block nor shared memory there.
func TestPlainMatVec8Bodies(t *testing.T) {
	plain, err := plainBodies(matvecSource(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"matvec8_q8_0_q8_0", "matvec8_q4_0_q8_0", "matvec8_q4_K_q8_K", "matvec8_bf16_bf16"} {
		if !plain[e] {
			t.Errorf("%s: not a plain body in the megakernel", e)
		}
	}
	if _, err := plainBodies("no lines"); err == nil {
		t.Error("a matvec.cu without MATVEC lines is accepted")
	}
}
