package megakernel

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"verity/device"
)

// paramWords gives device.Params's bits for every kernel of the table, fields of every kind
// filled with random bits (negative integers, NaNs and infinities among them).
func TestParamWordsAreParams(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for id, k := range Kernels() {
		at := k.ArgsType()
		for range 8 {
			v := reflect.New(at).Elem()
			for i := range v.NumField() {
				f := v.Field(i)
				switch f.Kind() {
				case reflect.Uint64, reflect.Uint32:
					f.SetUint(r.Uint64() >> (64 - 8*f.Type().Size()))
				case reflect.Int64, reflect.Int32:
					f.SetInt(int64(r.Uint64()) >> (64 - 8*f.Type().Size()))
				case reflect.Float32:
					f.Set(reflect.ValueOf(math.Float32frombits(r.Uint32())).Convert(f.Type()))
				}
			}
			args := v.Interface()
			ps, err := device.Params(args)
			if err != nil {
				t.Fatalf("%s: %v", k.Entry(), err)
			}
			got := make([]uint64, len(ps))
			if !paramWords(id, args, got) {
				t.Fatalf("%s: paramWords refused its own arguments", k.Entry())
			}
			for i, p := range ps {
				if got[i] != p.Bits {
					t.Fatalf("%s: parameter %d (%s) %#x, device.Params %#x", k.Entry(), i, p.Name, got[i], p.Bits)
				}
			}
			if paramWords(id, struct{ X int32 }{1}, got) || len(got) > 0 && paramWords(id, args, got[:len(got)-1]) {
				t.Fatalf("%s: paramWords took another type or a short destination", k.Entry())
			}
		}
	}
}
