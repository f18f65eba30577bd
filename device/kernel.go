package device

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"sync"
)

// Dim3 is a CUDA launch dimension.
type Dim3 struct{ X, Y, Z uint32 }

// Geometry is a kernel launch shape: grid of blocks, threads per block, dynamic shared memory.
type Geometry struct {
	Grid, Block Dim3
	Shared      uint32
}

// Spec is the type-erased view of a Kernel[A] that backends use.
type Spec interface {
	// Entry is the PTX .entry name; Module the PTX file stem that holds it.
	Entry() string
	Module() string
	// ArgsType is the Go type of the kernel's argument struct.
	ArgsType() reflect.Type
	// Geometry returns the launch shape for args.
	Geometry(args any) (Geometry, error)
	// RunTwin computes the kernel on the CPU.
	RunTwin(x *Exec, args any) error
}

// Kernel describes one kernel entry point with argument struct A.
type Kernel[A any] struct {
	EntryName  string
	ModuleName string
	// Shape gives the launch geometry for a, or an error for arguments the kernel cannot take.
	Shape func(a A) (Geometry, error)
	// Twin computes the same bits as the device code, on the CPU.
	Twin func(x *Exec, a A) error
}

func (k *Kernel[A]) Entry() string          { return k.EntryName }
func (k *Kernel[A]) Module() string         { return k.ModuleName }
func (k *Kernel[A]) ArgsType() reflect.Type { return reflect.TypeFor[A]() }

func (k *Kernel[A]) Geometry(args any) (Geometry, error) {
	a, ok := args.(A)
	if !ok {
		return Geometry{}, fmt.Errorf("device: kernel %s takes %v, got %T", k.EntryName, reflect.TypeFor[A](), args)
	}
	return k.Shape(a)
}

func (k *Kernel[A]) RunTwin(x *Exec, args any) error {
	a, ok := args.(A)
	if !ok {
		return fmt.Errorf("device: kernel %s takes %v, got %T", k.EntryName, reflect.TypeFor[A](), args)
	}
	if err := k.Twin(x, a); err != nil {
		return fmt.Errorf("%s: %w", k.EntryName, err)
	}
	return nil
}

// Launch runs k on b with typed arguments.
func Launch[A any](b Backend, k *Kernel[A], a A) error { return b.Launch(k, a) }

var (
	registryMu sync.Mutex
	registry   = map[string]Spec{}
)

// Register adds a kernel to the registry (at init time) after checking that its argument
// struct flattens into PTX parameters. It panics on a duplicate entry name or a bad struct.
func Register[A any](k *Kernel[A]) *Kernel[A] {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[k.EntryName]; dup {
		panic("device: kernel " + k.EntryName + " registered twice")
	}
	var zero A
	if _, err := Params(zero); err != nil {
		panic(fmt.Sprintf("device: kernel %s: %v", k.EntryName, err))
	}
	registry[k.EntryName] = k
	return k
}

// Kernels returns every registered kernel, sorted by entry name.
func Kernels() []Spec {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Spec, 0, len(registry))
	for _, k := range registry {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entry() < out[j].Entry() })
	return out
}

// ParamKind is a PTX parameter type.
type ParamKind uint8

const (
	U64 ParamKind = iota // .u64 (pointers, 64-bit integers)
	U32                  // .u32 / .s32
	F32                  // .f32
)

func (k ParamKind) String() string { return [...]string{"u64", "u32", "f32"}[k] }

// Param is one kernel parameter: its kind and its bits in the low bytes of an 8-byte slot.
type Param struct {
	Name string
	Kind ParamKind
	Bits uint64
}

var ptrType = reflect.TypeFor[Ptr]()

// Params flattens an argument struct into its PTX parameter list, field by field.
func Params(args any) ([]Param, error) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("kernel arguments must be a struct, got %T", args)
	}
	t := v.Type()
	out := make([]Param, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			return nil, fmt.Errorf("%v.%s: unexported field in kernel arguments", t, f.Name)
		}
		fv := v.Field(i)
		p := Param{Name: f.Name}
		switch {
		case f.Type == ptrType:
			p.Kind, p.Bits = U64, fv.Uint()
		case f.Type.Kind() == reflect.Int64:
			p.Kind, p.Bits = U64, uint64(fv.Int())
		case f.Type.Kind() == reflect.Uint64:
			p.Kind, p.Bits = U64, fv.Uint()
		case f.Type.Kind() == reflect.Int32:
			p.Kind, p.Bits = U32, uint64(uint32(fv.Int()))
		case f.Type.Kind() == reflect.Uint32:
			p.Kind, p.Bits = U32, fv.Uint()
		case f.Type.Kind() == reflect.Float32:
			p.Kind, p.Bits = F32, uint64(math.Float32bits(float32(fv.Float())))
		default:
			return nil, fmt.Errorf("%v.%s: type %v cannot be a kernel parameter", t, f.Name, f.Type)
		}
		out = append(out, p)
	}
	return out, nil
}

// Unflatten is the inverse of Params: it builds a value of argument struct type t from the
// bits of its parameters, one per field in order.
func Unflatten(t reflect.Type, bits []uint64) (any, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("kernel arguments must be a struct, got %v", t)
	}
	if len(bits) != t.NumField() {
		return nil, fmt.Errorf("%v has %d parameters, got %d", t, t.NumField(), len(bits))
	}
	v := reflect.New(t).Elem()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		switch {
		case f.Type == ptrType, f.Type.Kind() == reflect.Uint64:
			fv.SetUint(bits[i])
		case f.Type.Kind() == reflect.Int64:
			fv.SetInt(int64(bits[i]))
		case f.Type.Kind() == reflect.Int32:
			fv.SetInt(int64(int32(uint32(bits[i]))))
		case f.Type.Kind() == reflect.Uint32:
			fv.SetUint(uint64(uint32(bits[i])))
		case f.Type.Kind() == reflect.Float32:
			// Set, not SetFloat: a float64 round trip would quiet a signalling NaN
			fv.Set(reflect.ValueOf(math.Float32frombits(uint32(bits[i]))).Convert(f.Type))
		default:
			return nil, fmt.Errorf("%v.%s: type %v cannot be a kernel parameter", t, f.Name, f.Type)
		}
	}
	return v.Interface(), nil
}
