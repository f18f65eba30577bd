package device_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"verity/device"
	_ "verity/device/kernels"
)

// Unflatten inverts Params for every registered kernel's argument struct, bit for bit (random
// field values, including NaN payloads in float fields).
func TestUnflattenInvertsParams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range device.Kernels() {
		at := k.ArgsType()
		for trial := 0; trial < 20; trial++ {
			v := reflect.New(at).Elem()
			for i := 0; i < at.NumField(); i++ {
				f := v.Field(i)
				switch f.Kind() {
				case reflect.Uint64, reflect.Uint32:
					f.SetUint(r.Uint64())
				case reflect.Int64, reflect.Int32:
					f.SetInt(int64(r.Uint64()))
				case reflect.Float32:
					f.Set(reflect.ValueOf(math.Float32frombits(r.Uint32())).Convert(f.Type()))
				}
			}
			args := v.Interface()
			ps, err := device.Params(args)
			if err != nil {
				t.Fatalf("%s: %v", k.Entry(), err)
			}
			bits := make([]uint64, len(ps))
			for i, p := range ps {
				bits[i] = p.Bits
			}
			back, err := device.Unflatten(at, bits)
			if err != nil {
				t.Fatalf("%s: %v", k.Entry(), err)
			}
			ps2, _ := device.Params(back)
			if !reflect.DeepEqual(ps, ps2) {
				t.Fatalf("%s: %v round-trips to %v", k.Entry(), ps, ps2)
			}
		}
	}
	if _, err := device.Unflatten(reflect.TypeFor[struct{ X device.Ptr }](), []uint64{1, 2}); err == nil {
		t.Error("Unflatten accepted the wrong number of parameters")
	}
}
