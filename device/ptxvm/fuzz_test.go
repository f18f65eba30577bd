package ptxvm

import (
	"os"
	"testing"

	"verity/device"
)

// FuzzLoad: any text either fails to load with an error or loads into kernels that launch
// (with zero parameters, tiny geometry and a small step budget) without panicking.
func FuzzLoad(f *testing.F) {
	for _, body := range []string{
		"add.rz.f32 %f0, %f1, %f2;" + outF32,
		"shfl.sync.bfly.b32 %r0, %r1, 1, 31, -1;" + out32,
		"setp.lt.s32 %p0, %r1, %r2;\n\t@%p0 bra $done;" + outP,
		"cvt.rn.f16x2.f32 %r0, %f1, %f2;" + out32,
	} {
		f.Add(aluKernel(body))
	}
	f.Add(idxKernel(reduceDecls, reduceBody(true)))
	if b, err := os.ReadFile("testdata/intrinsics.ptx"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Load(src)
		if err != nil {
			return
		}
		var mem testMem
		mem.add(make([]byte, 64), true)
		for _, name := range m.Entries() {
			k := m.Kernel(name)
			ps := make([]device.Param, len(k.params))
			for i, p := range k.params {
				ps[i] = device.Param{Name: p.name, Kind: device.U32}
				if p.size == 8 {
					ps[i].Kind = device.U64
				}
				if p.typ == kF32 {
					ps[i].Kind = device.F32
				}
			}
			k.Launch(device.Geometry{Grid: dim(2), Block: dim(40), Shared: 64}, ps, &mem, Config{MaxSteps: 2000, Workers: 1})
		}
	})
}
