package exec

import (
	"errors"
	"fmt"
	"runtime"

	"verity/device"
	"verity/device/cpu"
	"verity/host/model"
	"verity/megakernel"
)

// What an op reads and writes, as megakernel resources: a program buffer, or a layer's K/V
// cache, conv state or SSM state. Step inputs the host writes (tokens, slots, key lists, state
// slots, RoPE tables) are never written by an op, so reading them orders nothing.
const (
	resBuf megakernel.Resource = (iota + 1) << 40
	resKV
	resConv
	resSSM
)

// Access returns the resources op reads and writes.
func Access(op *model.Op) (reads, writes []megakernel.Resource) {
	for _, b := range op.In {
		reads = append(reads, resBuf|megakernel.Resource(b))
	}
	l := megakernel.Resource(op.Layer)
	switch op.Kind {
	case model.OpKVStore: // Out names the K input; the op writes only the cache
		return reads, []megakernel.Resource{resKV | l}
	case model.OpAttention:
		reads = append(reads, resKV|l)
	case model.OpGDNConv:
		reads, writes = append(reads, resConv|l), append(writes, resConv|l)
	case model.OpGDNScan:
		reads, writes = append(reads, resSSM|l), append(writes, resSSM|l)
	case model.OpSplitGate, model.OpRouter:
		writes = append(writes, resBuf|megakernel.Resource(op.Out2))
	}
	return reads, append(writes, resBuf|megakernel.Resource(op.Out))
}

// MegakernelRunner runs a megakernel stream on a backend.
type MegakernelRunner interface {
	// SMs is the number of queues a stream for this runner has.
	SMs() int
	Run(stream []byte) error
}

// vmRunner runs streams with the megakernel's Go VM over a CPU backend's memory.
type vmRunner struct {
	vm  megakernel.VM
	sms int
}

func (r *vmRunner) SMs() int                { return r.sms }
func (r *vmRunner) Run(stream []byte) error { return r.vm.Run(stream) }

// NewMegakernelRunner returns the megakernel interpreter for backend b with sms queues (0: one
// per CPU for the Go VM). The CPU backend runs the Go VM; the other backends have no
// megakernel yet (device.ErrUnsupported).
func NewMegakernelRunner(b device.Backend, sms int) (MegakernelRunner, error) {
	c, ok := b.(*cpu.Backend)
	if !ok {
		return nil, fmt.Errorf("exec: no megakernel on %s: %w", b.Name(), device.ErrUnsupported)
	}
	if sms == 0 {
		sms = runtime.NumCPU()
	}
	if sms < 1 || sms > megakernel.MaxSMs {
		return nil, fmt.Errorf("exec: %d megakernel SMs (1…%d allowed)", sms, megakernel.MaxSMs)
	}
	return &vmRunner{vm: megakernel.VM{Mem: c}, sms: sms}, nil
}

// Megakernel is a Launcher that compiles each step into a megakernel stream and runs it.
type Megakernel struct {
	e   *Executor
	r   MegakernelRunner
	cfg megakernel.Config
	// Last is the schedule of the last step (for reports: parts, estimate).
	Last *megakernel.Schedule
}

// UseMegakernel makes e run every step as one megakernel stream on r (see SetLauncher).
func (e *Executor) UseMegakernel(r MegakernelRunner) *Megakernel {
	m := &Megakernel{e: e, r: r, cfg: megakernel.Config{SMs: r.SMs()}}
	e.SetLauncher(m)
	return m
}

// LaunchStep builds the step's schedule and runs its stream.
func (m *Megakernel) LaunchStep(ls []Launch) error {
	if len(ls) == 0 {
		return errors.New("megakernel: a step with no launches")
	}
	ops := make([]megakernel.Op, len(ls))
	for i, l := range ls {
		reads, writes := Access(l.Op)
		ops[i] = megakernel.Op{Name: l.Op.Name, Kernel: l.Kernel, Args: l.Args, Reads: reads, Writes: writes,
			Bytes: l.Op.WeightBytes + int64(l.Rows)*l.Op.BytesPerRow + int64(m.e.stepKeys)*l.Op.BytesPerKey}
	}
	s, err := megakernel.Build(ops, m.cfg)
	if err != nil {
		return err
	}
	m.Last = s
	return m.r.Run(s.Encode())
}
