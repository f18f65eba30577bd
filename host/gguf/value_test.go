package gguf

import (
	"math"
	"strings"
	"testing"
)

func TestValueTypeString(t *testing.T) {
	want := []string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
		"string", "array", "uint64", "int64", "float64"}
	for i, w := range want {
		if got := ValueType(i).String(); got != w {
			t.Errorf("ValueType(%d) = %q, want %q", i, got, w)
		}
	}
	if got := ValueType(13).String(); got != "type(13)" {
		t.Errorf("ValueType(13) = %q", got)
	}
}

func TestConstructors(t *testing.T) {
	tests := []struct {
		v    Value
		typ  ValueType
		elem ValueType // for arrays
		n    int
		x    any
	}{
		{U8(7), TypeUint8, 0, 0, uint8(7)},
		{I8(-7), TypeInt8, 0, 0, int8(-7)},
		{U16(700), TypeUint16, 0, 0, uint16(700)},
		{I16(-700), TypeInt16, 0, 0, int16(-700)},
		{U32(70000), TypeUint32, 0, 0, uint32(70000)},
		{I32(-70000), TypeInt32, 0, 0, int32(-70000)},
		{F32(1.5), TypeFloat32, 0, 0, float32(1.5)},
		{Bool(true), TypeBool, 0, 0, true},
		{Str("x"), TypeString, 0, 0, "x"},
		{U64(1 << 40), TypeUint64, 0, 0, uint64(1 << 40)},
		{I64(-1 << 40), TypeInt64, 0, 0, int64(-1 << 40)},
		{F64(2.25), TypeFloat64, 0, 0, 2.25},
		{ArrStrings([]string{"a", "b"}), TypeArray, TypeString, 2, nil},
		{ArrInt32s([]int32{1, 2, 3}), TypeArray, TypeInt32, 3, nil},
		{ArrUint32s(nil), TypeArray, TypeUint32, 0, nil},
		{ArrFloat32s([]float32{1}), TypeArray, TypeFloat32, 1, nil},
		{ArrOf([]bool{true}), TypeArray, TypeBool, 1, nil},
		{Arr(TypeUint64, []uint64{1, 2}), TypeArray, TypeUint64, 2, nil},
		{Arr(TypeArray, []Value{ArrOf([]int8{1}), ArrStrings(nil)}), TypeArray, TypeArray, 2, nil},
	}
	for _, tt := range tests {
		v := tt.v
		if v.Type() != tt.typ {
			t.Errorf("%v: Type = %s, want %s", v, v.Type(), tt.typ)
		}
		elem, isArr := v.Elem()
		if isArr != (tt.typ == TypeArray) || (isArr && elem != tt.elem) {
			t.Errorf("%v: Elem = %s, %v", v, elem, isArr)
		}
		if v.Len() != tt.n {
			t.Errorf("%v: Len = %d, want %d", v, v.Len(), tt.n)
		}
		if tt.x != nil && v.Any() != tt.x {
			t.Errorf("%v: Any = %#v, want %#v", v, v.Any(), tt.x)
		}
		if err := v.check(maxDepth); err != nil {
			t.Errorf("%v: check: %v", v, err)
		}
		if !v.Equal(v) {
			t.Errorf("%v: not equal to itself", v)
		}
	}
	if s, ok := ArrUint32s(nil).Any().([]uint32); !ok || s == nil {
		t.Errorf("ArrUint32s(nil).Any() = %#v, want an empty non-nil slice", ArrUint32s(nil).Any())
	}
}

func TestArrPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"elem=uint32/slice=int32", func() { Arr(TypeUint32, []int32{1}) }},
		{"elem=string/slice=int", func() { Arr(TypeString, []int{1}) }},
		{"elem=array/scalar-element", func() { Arr(TypeArray, []Value{U8(1)}) }},
		{"ArrOf/scalar-element", func() { ArrOf([]Value{Str("x")}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.f()
		})
	}
}

func TestValueEqual(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001)
	tests := []struct {
		a, b Value
		want bool
	}{
		{F32(nan), F32(nan), true},
		{F32(0), F32(float32(math.Copysign(0, -1))), false},
		{F64(math.NaN()), F64(math.NaN()), true},
		{U32(1), I32(1), false},
		{U32(1), U32(2), false},
		{ArrFloat32s([]float32{nan, 1}), ArrFloat32s([]float32{nan, 1}), true},
		{ArrStrings([]string{"a"}), ArrStrings([]string{"b"}), false},
		{ArrStrings(nil), ArrOf([]int8{}), false},
		{ArrOf([]Value{ArrOf([]uint8{1})}), ArrOf([]Value{ArrOf([]uint8{1})}), true},
		{ArrOf([]Value{ArrOf([]uint8{1})}), ArrOf([]Value{ArrOf([]uint8{2})}), false},
		{Value{}, U8(0), false},
	}
	for _, tt := range tests {
		if got := tt.a.Equal(tt.b); got != tt.want {
			t.Errorf("%v.Equal(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	long := make([]uint32, 128256)
	for i := range long {
		long[i] = uint32(i + 1)
	}
	tests := []struct {
		v    Value
		max  int
		want string
	}{
		{U8(255), 8, "255"},
		{I64(-5), 8, "-5"},
		{U64(math.MaxUint64), 8, "18446744073709551615"},
		{F32(1e-5), 8, "1e-05"},
		{F32(0.1), 8, "0.1"},
		{F64(0.1), 8, "0.1"},
		{Bool(false), 8, "false"},
		{Str("a \"b\"\n"), 8, `"a \"b\"\n"`},
		{Str("\xff"), 8, `"\xff"`},
		{ArrUint32s(long), 3, "[1, 2, 3, ... 128256 items]"},
		{ArrUint32s(long[:3]), 3, "[1, 2, 3]"},
		{ArrUint32s(long[:3]), -1, "[1, 2, 3]"},
		{ArrUint32s(long[:3]), 0, "[... 3 items]"},
		{ArrStrings([]string{"Ġt", "he"}), 8, `["Ġt", "he"]`},
		{ArrStrings(nil), 8, "[]"},
		{ArrOf([]Value{ArrOf([]int8{-1, 2}), ArrOf([]bool{true})}), 1, "[[-1, ... 2 items], ... 2 items]"},
		{Value{}, 8, "<invalid>"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v, tt.max); got != tt.want {
			t.Errorf("FormatValue(%s, %d) = %s, want %s", tt.v.Type(), tt.max, got, tt.want)
		}
	}
	if s := ArrUint32s(long).String(); !strings.HasSuffix(s, "8, ... 128256 items]") {
		t.Errorf("String() = %s", s)
	}
}
