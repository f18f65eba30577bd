package quantize

import (
	"fmt"
	"strconv"
	"strings"

	"verity/device/dtype"
)

// FileType is llama.cpp's llama_ftype, the value of general.file_type: the quantisation a
// file was made with, named as llama-quantize names it ("Q4_K_M").
type FileType uint32

// The file types Verity writes (llama.h's LLAMA_FTYPE_ALL_F32 and LLAMA_FTYPE_MOSTLY_*).
const (
	FileF32   FileType = 0
	FileF16   FileType = 1
	FileQ4_0  FileType = 2
	FileQ4_1  FileType = 3
	FileQ8_0  FileType = 7
	FileQ5_0  FileType = 8
	FileQ5_1  FileType = 9
	FileQ2_K  FileType = 10
	FileQ3_KS FileType = 11
	FileQ3_KM FileType = 12
	FileQ3_KL FileType = 13
	FileQ4_KS FileType = 14
	FileQ4_KM FileType = 15
	FileQ5_KS FileType = 16
	FileQ5_KM FileType = 17
	FileQ6_K  FileType = 18
	FileBF16  FileType = 32
)

var fileTypes = []struct {
	ft   FileType
	name string
	base dtype.Type // the type of the weights the mix does not single out
}{
	{FileF32, "F32", dtype.F32}, {FileF16, "F16", dtype.F16}, {FileBF16, "BF16", dtype.BF16},
	{FileQ4_0, "Q4_0", dtype.Q4_0}, {FileQ4_1, "Q4_1", dtype.Q4_1}, {FileQ5_0, "Q5_0", dtype.Q5_0},
	{FileQ5_1, "Q5_1", dtype.Q5_1}, {FileQ8_0, "Q8_0", dtype.Q8_0}, {FileQ2_K, "Q2_K", dtype.Q2_K},
	{FileQ3_KS, "Q3_K_S", dtype.Q3_K}, {FileQ3_KM, "Q3_K_M", dtype.Q3_K}, {FileQ3_KL, "Q3_K_L", dtype.Q3_K},
	{FileQ4_KS, "Q4_K_S", dtype.Q4_K}, {FileQ4_KM, "Q4_K_M", dtype.Q4_K},
	{FileQ5_KS, "Q5_K_S", dtype.Q5_K}, {FileQ5_KM, "Q5_K_M", dtype.Q5_K}, {FileQ6_K, "Q6_K", dtype.Q6_K},
}

// fileTypeAliases are llama-quantize's other names: a K-quant's bare name is its _M mix.
var fileTypeAliases = map[string]FileType{"Q3_K": FileQ3_KM, "Q4_K": FileQ4_KM, "Q5_K": FileQ5_KM}

func (f FileType) entry() (int, bool) {
	for i, e := range fileTypes {
		if e.ft == f {
			return i, true
		}
	}
	return 0, false
}

// Known reports whether f is one of the file types above.
func (f FileType) Known() bool { _, ok := f.entry(); return ok }

// String returns llama-quantize's name of f ("Q4_K_M"), or "FileType(n)" for others.
func (f FileType) String() string {
	if i, ok := f.entry(); ok {
		return fileTypes[i].name
	}
	return fmt.Sprintf("FileType(%d)", uint32(f))
}

// MarshalText returns f's name; it fails for unknown file types.
func (f FileType) MarshalText() ([]byte, error) {
	if !f.Known() {
		return nil, fmt.Errorf("quantize: unknown file type %d", uint32(f))
	}
	return []byte(f.String()), nil
}

// Base returns the type of the weights that f's mix does not single out (F32 for unknown
// file types).
func (f FileType) Base() dtype.Type {
	if i, ok := f.entry(); ok {
		return fileTypes[i].base
	}
	return dtype.F32
}

// FileTypeNames lists the names ParseFileType takes, in the order of FileTypes' table.
func FileTypeNames() []string {
	names := make([]string, len(fileTypes))
	for i, e := range fileTypes {
		names[i] = e.name
	}
	return names
}

// ParseFileType parses a file type as llama-quantize takes it: a name (any case: "Q4_K_M",
// "q8_0"), a K-quant's bare name for its _M mix ("Q4_K"), or the number ("15").
func ParseFileType(s string) (FileType, error) {
	for _, e := range fileTypes {
		if strings.EqualFold(e.name, s) {
			return e.ft, nil
		}
	}
	if ft, ok := fileTypeAliases[strings.ToUpper(s)]; ok {
		return ft, nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil && FileType(n).Known() {
		return FileType(n), nil
	}
	return 0, fmt.Errorf("quantize: unknown file type %q; want one of %s (or Q3_K, Q4_K, Q5_K for the _M mixes)", s, strings.Join(FileTypeNames(), " "))
}

// FileTypeOf returns the file type llama-quantize writes for a file quantised to t with
// --pure (for the K-quants, the _M variant).
func FileTypeOf(t dtype.Type) (FileType, error) {
	switch t {
	case dtype.Q3_K:
		return FileQ3_KM, nil
	case dtype.Q4_K:
		return FileQ4_KM, nil
	case dtype.Q5_K:
		return FileQ5_KM, nil
	}
	for _, e := range fileTypes {
		if e.base == t {
			return e.ft, nil
		}
	}
	return 0, fmt.Errorf("quantize: no llama.cpp file type for %s", t)
}
