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
	want, shared, err := Generate()
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

// A body's shared memory is its entry's shared struct; the buffer is the largest of them.
func TestSharedIsTheLargestStruct(t *testing.T) {
	_, shared, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	largest := 0
	for _, k := range megakernel.Kernels() {
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
