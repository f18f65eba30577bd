// Command libverity is Verity's C library: go build -buildmode=c-shared -o libverity.so
// ./tools/libverity builds libverity.so, and verity.h (generated from lib.go by go generate
// ./tools/libverity, which needs no cgo) declares its ABI — models and sessions behind integer handles,
// tokenization, chat generation with a text callback, tree verification with commit and
// rollback, statistics — with the rules every function follows. The README's "C library"
// section shows it from C and from Python's ctypes.
//
// The functions' work is in core.go, free of cgo; lib.go holds the C types (its preamble,
// which becomes verity.h) and the exported functions, built only with cgo. Without cgo the
// package builds to a program that does nothing.
package main

//go:generate env CGO_ENABLED=0 go test -run ^TestHeader$ . -update

func main() {}
