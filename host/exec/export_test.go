package exec

import (
	"fmt"

	"verity/device"
	"verity/host/model"
	"verity/megakernel"
)

// ResourcePtrs are the allocations of resource r on e.
func ResourcePtrs(e *Executor, r megakernel.Resource) []device.Ptr {
	i := int(r & (1<<40 - 1))
	switch r &^ (1<<40 - 1) {
	case resBuf:
		return []device.Ptr{e.bufs[i]}
	case resKV:
		return []device.Ptr{e.kcache[i], e.vcache[i]}
	case resConv:
		return []device.Ptr{e.conv[i]}
	case resSSM:
		return []device.Ptr{e.ssm[i]}
	case resAttn:
		return []device.Ptr{e.attnPart, e.attnCount}
	}
	panic(fmt.Sprintf("unknown resource %#x", uint64(r)))
}

// Mutable names e's writable allocations.
func Mutable(e *Executor) map[device.Ptr]string {
	m := map[device.Ptr]string{}
	for i, p := range e.bufs {
		m[p] = "buffer " + e.p.Buffers[i].Name
	}
	for l := range e.kcache {
		m[e.kcache[l]], m[e.vcache[l]] = fmt.Sprint("K cache ", l), fmt.Sprint("V cache ", l)
	}
	for l := range e.conv {
		m[e.conv[l]], m[e.ssm[l]] = fmt.Sprint("conv state ", l), fmt.Sprint("SSM state ", l)
	}
	m[e.attnPart], m[e.attnCount] = "attention partials", "attention counters"
	delete(m, 0)
	return m
}

// Weights are e's uploaded weights (GGUF bytes and device layouts).
func Weights(e *Executor) map[device.Ptr]bool {
	m := map[device.Ptr]bool{}
	for _, p := range e.weights {
		m[p] = true
	}
	for _, p := range e.packed {
		m[p] = true
	}
	return m
}

// Inputs are the buffers the host writes before each step.
func Inputs(e *Executor) map[device.Ptr]bool {
	m := map[device.Ptr]bool{}
	for _, b := range []model.Buf{e.p.Tokens, e.p.Slots, e.p.Keys, e.p.KeyOff, e.p.OutRows, e.p.StateSrc, e.p.StateDst} {
		m[e.bufs[b]] = true
	}
	for _, t := range e.p.Ropes {
		m[e.bufs[t.Buf]] = true
	}
	return m
}

// SetSpins sets the polls a device runner's megakernel waits before it gives up.
func SetSpins(r MegakernelRunner, spins uint32) { r.(*deviceRunner).spins = spins }

// RunnerStream is the stream a device runner last loaded, as it keeps it on the host.
func RunnerStream(r MegakernelRunner) []byte { return r.(*deviceRunner).host }

// Rebuilt is the schedule built afresh from the launches of m's last step.
func Rebuilt(m *Megakernel) (*megakernel.Schedule, error) {
	return schedule(m.cache[0].ls, m.e.stepDistinct, m.e.packedBytes, m.cfg)
}

// LoweredAfresh reports the first of e's kept step shapes whose launches are not those Lower
// makes for it now.
func LoweredAfresh(e *Executor) error {
	was, wasShared := e.stepChunks, e.stepShared
	defer func() { e.stepChunks, e.stepShared = was, wasShared }()
	for shape, kept := range e.lowered {
		e.stepChunks, e.stepShared = shape[2], shape[3]
		ls, err := e.Lower(shape[0], shape[1])
		if err != nil {
			return err
		}
		if len(ls) != len(kept) {
			return fmt.Errorf("shape %v: %d launches kept, %d lowered", shape, len(kept), len(ls))
		}
		for i := range ls {
			a, b := kept[i], ls[i]
			if a.Index != b.Index || a.Op != b.Op || a.Rows != b.Rows || a.Kernel != b.Kernel || a.Args != b.Args {
				return fmt.Errorf("shape %v: launch %d %s is not the one lowered", shape, i, a.Op.Name)
			}
		}
	}
	return nil
}

// CopyKeys is copyKeys.
var CopyKeys = copyKeys
