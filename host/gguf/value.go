package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value, as stored in the file (gguf_metadata_value_type).
type ValueType uint32

// The metadata value types. The numbering is the file format's.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{
	TypeUint8: "uint8", TypeInt8: "int8", TypeUint16: "uint16", TypeInt16: "int16",
	TypeUint32: "uint32", TypeInt32: "int32", TypeFloat32: "float32", TypeBool: "bool",
	TypeString: "string", TypeArray: "array", TypeUint64: "uint64", TypeInt64: "int64",
	TypeFloat64: "float64",
}

// String returns the Go-style name of the type ("uint32", "string", "array"), or "type(N)" for
// an id the format does not define.
func (t ValueType) String() string {
	if t.valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// minSize is the fewest bytes a value of type t takes in a file: the fixed size of a scalar, the
// length prefix of a string, the element type and count of an array.
func (t ValueType) minSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return 0
}

// Value is one decoded metadata value. Scalars hold the Go value of their type (uint8 … float64,
// bool, string); arrays hold a typed slice ([]uint32, []string, []float32 …) or, for arrays of
// arrays, a []Value whose elements are arrays. Strings are kept as stored: they need not be
// valid UTF-8.
//
// Values share their slices: neither the constructors nor Any copy them, and callers must not
// modify a slice once it is in a Value. The zero Value is invalid (its Any is nil).
type Value struct {
	typ  ValueType
	elem ValueType // element type when typ == TypeArray
	x    any
}

// Type returns the value's type tag (TypeArray for arrays).
func (v Value) Type() ValueType { return v.typ }

// Elem returns the element type of an array; ok is false for a scalar.
func (v Value) Elem() (elem ValueType, ok bool) {
	if v.typ != TypeArray {
		return 0, false
	}
	return v.elem, true
}

// Len returns the number of elements of an array, or 0 for a scalar.
func (v Value) Len() int {
	if v.typ != TypeArray {
		return 0
	}
	switch s := v.x.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []Value:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	}
	return 0
}

// Any returns the Go value: uint8 … float64, bool or string for a scalar, the typed slice for an
// array ([]Value for an array of arrays), nil for the zero Value.
func (v Value) Any() any { return v.x }

// String formats the value as FormatValue does with at most 8 array elements shown.
func (v Value) String() string { return FormatValue(v, 8) }

// Scalar constructors.

func U8(x uint8) Value    { return Value{typ: TypeUint8, x: x} }
func I8(x int8) Value     { return Value{typ: TypeInt8, x: x} }
func U16(x uint16) Value  { return Value{typ: TypeUint16, x: x} }
func I16(x int16) Value   { return Value{typ: TypeInt16, x: x} }
func U32(x uint32) Value  { return Value{typ: TypeUint32, x: x} }
func I32(x int32) Value   { return Value{typ: TypeInt32, x: x} }
func F32(x float32) Value { return Value{typ: TypeFloat32, x: x} }
func Bool(x bool) Value   { return Value{typ: TypeBool, x: x} }
func Str(x string) Value  { return Value{typ: TypeString, x: x} }
func U64(x uint64) Value  { return Value{typ: TypeUint64, x: x} }
func I64(x int64) Value   { return Value{typ: TypeInt64, x: x} }
func F64(x float64) Value { return Value{typ: TypeFloat64, x: x} }

// Element lists the Go types an array can hold; Value stands for a nested array.
type Element interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64 | Value
}

// ArrOf returns an array value holding s (not copied). The element type follows from the Go
// type; for []Value it is TypeArray, and ArrOf panics unless every element is an array.
func ArrOf[T Element](s []T) Value {
	if s == nil {
		s = []T{}
	}
	elem, ok := sliceElem(s)
	if !ok {
		panic("gguf: unreachable: unhandled element type")
	}
	if vs, isv := any(s).([]Value); isv {
		mustArrays(vs)
	}
	return Value{typ: TypeArray, elem: elem, x: s}
}

// Arr returns an array of element type elem holding elems (not copied), which must be the
// matching slice type: []uint8 for TypeUint8, …, []string for TypeString, and []Value of array
// values for TypeArray. Arr panics on a mismatch, a programmer error.
func Arr(elem ValueType, elems any) Value {
	got, ok := sliceElem(elems)
	if !ok || got != elem {
		panic(fmt.Sprintf("gguf: Arr(%s, %T): slice type does not match the element type", elem, elems))
	}
	if vs, isv := elems.([]Value); isv {
		mustArrays(vs)
		if vs == nil {
			elems = []Value{}
		}
	}
	return Value{typ: TypeArray, elem: elem, x: elems}
}

// ArrStrings, ArrInt32s, ArrUint32s and ArrFloat32s are ArrOf for the common array types.
func ArrStrings(s []string) Value   { return ArrOf(s) }
func ArrInt32s(s []int32) Value     { return ArrOf(s) }
func ArrUint32s(s []uint32) Value   { return ArrOf(s) }
func ArrFloat32s(s []float32) Value { return ArrOf(s) }

func mustArrays(vs []Value) {
	for i, e := range vs {
		if e.typ != TypeArray || e.x == nil {
			panic(fmt.Sprintf("gguf: element %d of an array of arrays is a %s", i, e.typ))
		}
	}
}

// sliceElem maps a Go slice type to its element ValueType.
func sliceElem(s any) (ValueType, bool) {
	switch s.(type) {
	case []uint8:
		return TypeUint8, true
	case []int8:
		return TypeInt8, true
	case []uint16:
		return TypeUint16, true
	case []int16:
		return TypeInt16, true
	case []uint32:
		return TypeUint32, true
	case []int32:
		return TypeInt32, true
	case []float32:
		return TypeFloat32, true
	case []bool:
		return TypeBool, true
	case []string:
		return TypeString, true
	case []Value:
		return TypeArray, true
	case []uint64:
		return TypeUint64, true
	case []int64:
		return TypeInt64, true
	case []float64:
		return TypeFloat64, true
	}
	return 0, false
}

// scalarType maps a Go scalar to its ValueType.
func scalarType(x any) (ValueType, bool) {
	switch x.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	}
	return 0, false
}

// check reports whether v is well formed and nests arrays at most depth levels deep.
func (v Value) check(depth int) error {
	if v.x == nil {
		return fmt.Errorf("invalid (zero) value")
	}
	if v.typ != TypeArray {
		if t, ok := scalarType(v.x); !ok || t != v.typ {
			return fmt.Errorf("%s value holds a %T", v.typ, v.x)
		}
		return nil
	}
	if depth <= 0 {
		return fmt.Errorf("arrays nested more than %d deep", maxDepth)
	}
	if t, ok := sliceElem(v.x); !ok || t != v.elem {
		return fmt.Errorf("array of %s holds a %T", v.elem, v.x)
	}
	if vs, ok := v.x.([]Value); ok {
		for i, e := range vs {
			if e.typ != TypeArray {
				return fmt.Errorf("element %d of an array of arrays is a %s", i, e.typ)
			}
			if err := e.check(depth - 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// Equal reports whether v and w have the same type and contents. Floats compare by bits, so a NaN
// equals the same NaN and 0 differs from -0.
func (v Value) Equal(w Value) bool {
	if v.typ != w.typ || v.elem != w.elem {
		return false
	}
	switch a := v.x.(type) {
	case float32:
		b, ok := w.x.(float32)
		return ok && math.Float32bits(a) == math.Float32bits(b)
	case float64:
		b, ok := w.x.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	case []float32:
		b, ok := w.x.([]float32)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return false
			}
		}
		return true
	case []float64:
		b, ok := w.x.([]float64)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				return false
			}
		}
		return true
	case []Value:
		b, ok := w.x.([]Value)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !a[i].Equal(b[i]) {
				return false
			}
		}
		return true
	case []uint8:
		return sliceEq(a, w.x)
	case []int8:
		return sliceEq(a, w.x)
	case []uint16:
		return sliceEq(a, w.x)
	case []int16:
		return sliceEq(a, w.x)
	case []uint32:
		return sliceEq(a, w.x)
	case []int32:
		return sliceEq(a, w.x)
	case []bool:
		return sliceEq(a, w.x)
	case []string:
		return sliceEq(a, w.x)
	case []uint64:
		return sliceEq(a, w.x)
	case []int64:
		return sliceEq(a, w.x)
	}
	return v.x == w.x
}

func sliceEq[T comparable](a []T, x any) bool {
	b, ok := x.([]T)
	if !ok || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FormatValue formats v for display: integers in decimal, floats in the shortest form that reads
// back exactly, strings quoted in Go syntax (invalid UTF-8 escaped), arrays as
// "[1, 2, 3, ... 128256 items]" — the first maxArray elements, then the total when some are left
// out. A negative maxArray shows every element.
func FormatValue(v Value, maxArray int) string {
	var sb strings.Builder
	formatTo(&sb, v, maxArray)
	return sb.String()
}

func formatTo(sb *strings.Builder, v Value, maxArray int) {
	if v.typ != TypeArray {
		sb.WriteString(formatScalar(v.x))
		return
	}
	n := v.Len()
	show := n
	if maxArray >= 0 && maxArray < n {
		show = maxArray
	}
	sb.WriteByte('[')
	for i := 0; i < show; i++ {
		if i > 0 {
			sb.WriteString(", ")
		}
		if vs, ok := v.x.([]Value); ok {
			formatTo(sb, vs[i], maxArray)
		} else {
			sb.WriteString(formatScalar(index(v.x, i)))
		}
	}
	if show < n {
		if show > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(sb, "... %d items", n)
	}
	sb.WriteByte(']')
}

func formatScalar(x any) string {
	switch a := x.(type) {
	case uint8:
		return strconv.FormatUint(uint64(a), 10)
	case uint16:
		return strconv.FormatUint(uint64(a), 10)
	case uint32:
		return strconv.FormatUint(uint64(a), 10)
	case uint64:
		return strconv.FormatUint(a, 10)
	case int8:
		return strconv.FormatInt(int64(a), 10)
	case int16:
		return strconv.FormatInt(int64(a), 10)
	case int32:
		return strconv.FormatInt(int64(a), 10)
	case int64:
		return strconv.FormatInt(a, 10)
	case float32:
		return strconv.FormatFloat(float64(a), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(a, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(a)
	case string:
		return strconv.Quote(a)
	case nil:
		return "<invalid>"
	}
	return fmt.Sprint(x)
}

// index returns element i of a typed scalar slice.
func index(s any, i int) any {
	switch a := s.(type) {
	case []uint8:
		return a[i]
	case []int8:
		return a[i]
	case []uint16:
		return a[i]
	case []int16:
		return a[i]
	case []uint32:
		return a[i]
	case []int32:
		return a[i]
	case []float32:
		return a[i]
	case []bool:
		return a[i]
	case []string:
		return a[i]
	case []uint64:
		return a[i]
	case []int64:
		return a[i]
	case []float64:
		return a[i]
	case []Value:
		return a[i]
	}
	return nil
}
