package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed kernel table is what the kernel registry and the committed PTX give now.
func TestTableIsFresh(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "ptx", File))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ptx/%s is stale: run go generate ./ptx", File)
	}
}
