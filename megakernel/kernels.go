package megakernel

import (
	"hash/fnv"
	"math"
	"reflect"
	"sync"

	"verity/device"
)

// The kernel table: instruction kernel numbers index device.Kernels() (sorted by entry name),
// less the megakernel itself.
// A stream carries a hash of the table's entry names, so a stream encoded by a binary with
// other kernels is refused rather than misread.
// module is the megakernel's own PTX module, left out of the table.
const module = "megakernel"

var (
	tableOnce sync.Once
	table     []device.Spec
	tableIDs  map[string]int
	tableHash uint32
	plans     [][]paramKind // each kernel's arguments, field by field (paramWords)
)

func loadTable() {
	tableOnce.Do(func() {
		for _, k := range device.Kernels() {
			if k.Module() != module {
				table = append(table, k)
			}
		}
		tableIDs = make(map[string]int, len(table))
		h := fnv.New32a()
		for i, k := range table {
			tableIDs[k.Entry()] = i
			h.Write([]byte(k.Entry()))
			h.Write([]byte{0})
		}
		tableHash = h.Sum32()
		plans = make([][]paramKind, len(table))
		for i, k := range table {
			plans[i] = planOf(k.ArgsType())
		}
	})
}

// paramKind is how a field of a kernel's arguments becomes its parameter's bits, as
// device.Params makes them.
type paramKind uint8

const (
	paramUint    paramKind = iota // a device.Ptr, uint64 or uint32: its value
	paramInt64                    // its two's complement
	paramInt32                    // its two's complement in the low 32 bits
	paramFloat32                  // its IEEE bits (through float64, as device.Params reads it)
)

// planOf is the kinds of t's fields, or nil when one cannot be a parameter (Register refuses
// such a kernel).
func planOf(t reflect.Type) []paramKind {
	if t.Kind() != reflect.Struct {
		return nil
	}
	plan := make([]paramKind, t.NumField())
	for i := range plan {
		switch t.Field(i).Type.Kind() {
		case reflect.Uint64, reflect.Uint32: // device.Ptr is a uint64
			plan[i] = paramUint
		case reflect.Int64:
			plan[i] = paramInt64
		case reflect.Int32:
			plan[i] = paramInt32
		case reflect.Float32:
			plan[i] = paramFloat32
		default:
			return nil
		}
	}
	return plan
}

// paramWords writes the parameter words of args, kernel id's arguments, into dst (one per
// field): device.Params's bits without its reflection per field name and type. ok is false
// when args are not that kernel's argument type or dst is not their size.
func paramWords(id int, args any, dst []uint64) (ok bool) {
	loadTable()
	if id < 0 || id >= len(table) || reflect.TypeOf(args) != table[id].ArgsType() || plans[id] == nil || len(dst) != len(plans[id]) {
		return false
	}
	v := reflect.ValueOf(args)
	for i, k := range plans[id] {
		f := v.Field(i)
		switch k {
		case paramUint:
			dst[i] = f.Uint()
		case paramInt64:
			dst[i] = uint64(f.Int())
		case paramInt32:
			dst[i] = uint64(uint32(f.Int()))
		case paramFloat32:
			dst[i] = uint64(math.Float32bits(float32(f.Float())))
		}
	}
	return true
}

// Kernels returns the kernel table: instruction kernel n is Kernels()[n].
func Kernels() []device.Spec {
	loadTable()
	return table
}

func kernelIDs() map[string]int {
	loadTable()
	return tableIDs
}

// TableHash identifies the kernel table (FNV-1a over the entry names, each ended by a zero).
func TableHash() uint32 {
	loadTable()
	return tableHash
}
