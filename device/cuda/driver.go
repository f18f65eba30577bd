//go:build cuda

package cuda

// The driver calls gorgonia.org/cu does not wrap: error names and descriptions, opting in to
// more than 48 KiB of dynamic shared memory, pinned host memory, stream capture and graph
// launch. Like everything else in the package they run on the backend's context goroutine.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"verity/device"
)

// DriverError is a failure the CUDA driver reported, named and described by the driver
// (cuGetErrorName, cuGetErrorString).
type DriverError struct {
	Code int    // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // e.g. "out of memory"
	msg  string
	err  error // the failing call's own error, for calls made through gorgonia.org/cu
}

func (e *DriverError) Error() string { return e.msg }
func (e *DriverError) Unwrap() error { return e.err }

// errorText returns the driver's name and description of code.
func errorText(code C.CUresult) (name, desc string) {
	var n, d *C.char
	if C.cuGetErrorName(code, &n) == C.CUDA_SUCCESS && n != nil {
		name = C.GoString(n)
	} else {
		name = fmt.Sprintf("CUresult %d", int(code))
	}
	if C.cuGetErrorString(code, &d) == C.CUDA_SUCCESS && d != nil {
		desc = C.GoString(d)
	} else {
		desc = "unknown error code"
	}
	return name, desc
}

// check turns the result of a driver call into nil or a *DriverError.
func check(code C.CUresult) error {
	if code == C.CUDA_SUCCESS {
		return nil
	}
	name, desc := errorText(code)
	return &DriverError{Code: int(code), Name: name, Desc: desc, msg: fmt.Sprintf("%s (%d): %s", name, int(code), desc)}
}

// sticky are the errors after which the CUDA docs say the process's context is unusable: every
// later call returns the same error, and only a new process can use the device again.
var sticky = map[int]bool{
	int(C.CUDA_ERROR_ECC_UNCORRECTABLE):     true,
	int(C.CUDA_ERROR_ILLEGAL_ADDRESS):       true,
	int(C.CUDA_ERROR_LAUNCH_TIMEOUT):        true,
	int(C.CUDA_ERROR_ASSERT):                true,
	int(C.CUDA_ERROR_HARDWARE_STACK_ERROR):  true,
	int(C.CUDA_ERROR_ILLEGAL_INSTRUCTION):   true,
	int(C.CUDA_ERROR_MISALIGNED_ADDRESS):    true,
	int(C.CUDA_ERROR_INVALID_ADDRESS_SPACE): true,
	int(C.CUDA_ERROR_INVALID_PC):            true,
	int(C.CUDA_ERROR_LAUNCH_FAILED):         true,
}

// Is makes a sticky error device.ErrDeviceLost.
func (e *DriverError) Is(target error) bool { return target == device.ErrDeviceLost && sticky[e.Code] }

// lost is the process's first sticky error (nil until one happens).
var lost atomic.Pointer[LostError]

// LostError is what every call returns once a device has faulted: the first fault, where it
// happened (the operation and kernel), and that nothing more runs in this process.
type LostError struct {
	First error // the call that faulted, e.g. "cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS …"
}

func (e *LostError) Error() string {
	return fmt.Sprintf("the device faulted earlier in this process, nothing more runs on it (%v)", e.First)
}
func (e *LostError) Unwrap() error { return device.ErrDeviceLost }

// noteLost records err as the process's fault if it is the first sticky error.
func noteLost(err error) {
	var de *DriverError
	if errors.As(err, &de) && sticky[de.Code] {
		lost.CompareAndSwap(nil, &LostError{First: err})
	}
}

// Lost returns the process's device fault (a *LostError naming the first sticky error), or nil
// while there has been none.
func Lost() error { return lostError() }

// lostError returns the process's fault (a *LostError), or nil.
func lostError() error {
	if l := lost.Load(); l != nil {
		return l
	}
	return nil
}

// describe returns err with the driver's name and description of the first gorgonia.org/cu
// result code in its chain in place of cu's own text (cu spells codes its own way and knows
// only those of the CUDA release it was generated from). Other errors are returned as they are.
func describe(err error) error {
	var de *DriverError
	if err == nil || errors.As(err, &de) {
		return err
	}
	r := cuResult(err)
	if r == nil {
		return err
	}
	code := C.CUresult(reflect.ValueOf(r).Int())
	name, desc := errorText(code)
	text := fmt.Sprintf("%s (%d): %s", name, int(code), desc)
	return &DriverError{Code: int(code), Name: name, Desc: desc, msg: strings.Replace(err.Error(), r.Error(), text, 1), err: err}
}

// cuResult finds gorgonia.org/cu's result type (an int kind named in package cu) in err's chain.
func cuResult(err error) error {
	for err != nil {
		if t := reflect.TypeOf(err); t.PkgPath() == "gorgonia.org/cu" && t.Kind() == reflect.Int {
			return err
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if r := cuResult(e); r != nil {
					return r
				}
			}
			return nil
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// cu.Function holds nothing but its CUfunction handle; rawFunction reads it. The arrays fail
// to compile if the sizes ever differ.
var (
	_ [unsafe.Sizeof(cu.Function{}) - unsafe.Sizeof(C.CUfunction(nil))]byte
	_ [unsafe.Sizeof(C.CUfunction(nil)) - unsafe.Sizeof(cu.Function{})]byte
)

func rawFunction(fn cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&fn)) }

func rawStream(s cu.Stream) C.CUstream { return C.CUstream(unsafe.Pointer(s.C())) }

// Staging: a transfer of at least stageMinDefault bytes goes through two pinned host buffers
// of stageChunk bytes, so that the host copy of one chunk overlaps the DMA of the other and the
// DMA runs at the pinned rate. Smaller transfers are plain cuMemcpyHtoD/DtoH calls.
const (
	stageChunk      = 8 << 20
	stageMinDefault = 2 * stageChunk
)

// extras is the state of the calls this file adds. Fields marked (mu) are guarded by the
// backend's mu; the others belong to the context goroutine.
type extras struct {
	smemOptin int                 // the device's opt-in shared memory per block; 0 until asked
	smemSet   map[cu.Function]int // dynamic shared memory each function was opted in to

	stageMin int64 // smallest staged transfer (tests change it)
	stage    [2]stageBuf

	capStream cu.Stream           // the stream launches are captured on; created on first use
	active    bool                // the capture stream is capturing
	capturing bool                // (mu) a Capture is under way: refuse what cannot be captured
	graphs    map[*Graph]struct{} // (mu) live graphs, destroyed by Close

	mapped map[device.Ptr]unsafe.Pointer // (mu) mapped host memory (AllocMapped), by device address

	marks      map[device.Mark]cu.Event // the Timeline's outstanding marks
	nextMark   device.Mark
	freeEvents []cu.Event // released marks' events, for reuse
}

type stageBuf struct {
	buf  []byte   // pinned host memory (cuMemHostAlloc)
	done cu.Event // recorded after the last copy that used buf
}

// capturable are the operations allowed while a graph is being captured: launches and what a
// launch may need on the way (a module, a function), copies, and the capture itself.
var capturable = map[string]bool{"launch": true, "function": true, "load": true, "copy": true, "capture": true}

// refuse reports whether op must be refused now (called with mu held).
func (x *extras) refuse(op string) bool { return x.capturing && !capturable[op] }

// launchStream is the stream launches and copies go on: the capture stream while a capture
// is active, else the NULL stream, which keeps everything in issue order.
func (x *extras) launchStream() cu.Stream {
	if x.active {
		return x.capStream
	}
	return cu.Stream{}
}

// sharedOptin returns the device's opt-in maximum of shared memory per block.
func (b *Backend) sharedOptin() (int, error) {
	if b.x.smemOptin == 0 {
		var dev C.CUdevice
		var v C.int
		if err := check(C.cuCtxGetDevice(&dev)); err != nil {
			return 0, err
		}
		if err := check(C.cuDeviceGetAttribute(&v, C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)); err != nil {
			return 0, err
		}
		b.x.smemOptin = int(v)
	}
	return b.x.smemOptin, nil
}

// allowShared lets fn launch with shared bytes of dynamic shared memory, beyond the 48 KiB a
// launch gets without opting in (cuFuncSetAttribute). More than the device allows, counting
// the function's static shared memory, is device.ErrUnsupported.
func (b *Backend) allowShared(fn cu.Function, shared uint32) error {
	if b.x.smemSet[fn] >= int(shared) {
		return nil
	}
	optin, err := b.sharedOptin()
	if err != nil {
		return err
	}
	f := rawFunction(fn)
	var static C.int
	if err := check(C.cuFuncGetAttribute(&static, C.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f)); err != nil {
		return err
	}
	if int(static)+int(shared) > optin {
		return fmt.Errorf("%d bytes of dynamic shared memory and %d static exceed the device's %d per block: %w",
			shared, int(static), optin, device.ErrUnsupported)
	}
	if err := check(C.cuFuncSetAttribute(f, C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(shared))); err != nil {
		return err
	}
	if b.x.smemSet == nil {
		b.x.smemSet = map[cu.Function]int{}
	}
	b.x.smemSet[fn] = int(shared)
	return nil
}

// AllocMapped returns n bytes of zeroed pinned host memory mapped into the device's address
// space (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP) and its device address.
func (b *Backend) AllocMapped(n int) (device.Ptr, []byte, error) {
	if n <= 0 || n > 1<<30 {
		return 0, nil, fmt.Errorf("cuda: mapped alloc %d: bad size", n)
	}
	var p unsafe.Pointer
	var d C.CUdeviceptr
	err := b.do("mapped alloc", fmt.Sprint(n), func() error {
		if err := check(C.cuMemHostAlloc(&p, C.size_t(n), C.CU_MEMHOSTALLOC_DEVICEMAP|C.CU_MEMHOSTALLOC_PORTABLE)); err != nil {
			return err
		}
		if err := check(C.cuMemHostGetDevicePointer(&d, p, 0)); err != nil {
			C.cuMemFreeHost(p)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	buf := unsafe.Slice((*byte)(p), n)
	clear(buf)
	b.mu.Lock()
	if b.x.mapped == nil {
		b.x.mapped = map[device.Ptr]unsafe.Pointer{}
	}
	b.x.mapped[device.Ptr(d)] = p
	b.mu.Unlock()
	return device.Ptr(d), buf, nil
}

// FreeMapped releases memory from AllocMapped.
func (b *Backend) FreeMapped(d device.Ptr) error {
	b.mu.Lock()
	p, ok := b.x.mapped[d]
	delete(b.x.mapped, d)
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: free mapped %#x: not mapped memory", uint64(d))
	}
	return b.do("mapped free", fmt.Sprintf("%#x", uint64(d)), func() error { return check(C.cuMemFreeHost(p)) })
}

// staged reports whether a transfer of n bytes goes through the pinned buffers.
func (x *extras) staged(n int) bool {
	min := x.stageMin
	if min == 0 {
		min = stageMinDefault
	}
	return int64(n) >= min
}

// stageBuffers allocates the pinned buffers and their events on first use.
func (x *extras) stageBuffers() error {
	for i := range x.stage {
		s := &x.stage[i]
		if s.buf != nil {
			continue
		}
		var p unsafe.Pointer
		if err := check(C.cuMemHostAlloc(&p, stageChunk, 0)); err != nil {
			return fmt.Errorf("pinned staging buffer: %w", err)
		}
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			C.cuMemFreeHost(p)
			return err
		}
		s.buf, s.done = unsafe.Slice((*byte)(p), stageChunk), ev
	}
	return nil
}

// writeStaged copies src to dst through the pinned buffers: chunk k is copied into buffer
// k mod 2 once the DMA of chunk k−2 has finished, then sent with an asynchronous copy on the
// NULL stream (so it is ordered after earlier launches, as cuMemcpyHtoD is). It returns when
// every chunk has arrived.
func (b *Backend) writeStaged(dst device.Ptr, src []byte) error {
	if err := b.x.stageBuffers(); err != nil {
		return err
	}
	for off, k := 0, 0; off < len(src); off, k = off+stageChunk, k+1 {
		s := &b.x.stage[k%2]
		if err := s.done.Synchronize(); err != nil {
			return err
		}
		n := copy(s.buf, src[off:])
		if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst)+cu.DevicePtr(off), unsafe.Pointer(&s.buf[0]), int64(n), cu.Stream{}); err != nil {
			return err
		}
		if err := s.done.Record(cu.Stream{}); err != nil {
			return err
		}
	}
	return b.x.stageWait()
}

// readStaged copies src to dst through the pinned buffers: the DMA of chunk k+1 runs while
// chunk k is copied out of its buffer.
func (b *Backend) readStaged(dst []byte, src device.Ptr) error {
	if err := b.x.stageBuffers(); err != nil {
		return err
	}
	chunks := (len(dst) + stageChunk - 1) / stageChunk
	issue := func(k int) error {
		s := &b.x.stage[k%2]
		off := k * stageChunk
		n := min(stageChunk, len(dst)-off)
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&s.buf[0]), cu.DevicePtr(src)+cu.DevicePtr(off), int64(n), cu.Stream{}); err != nil {
			return err
		}
		return s.done.Record(cu.Stream{})
	}
	if err := issue(0); err != nil {
		return err
	}
	for k := 0; k < chunks; k++ {
		if k+1 < chunks {
			// buffer (k+1) mod 2 was emptied in the previous iteration
			if err := issue(k + 1); err != nil {
				_ = b.x.stageWait()
				return err
			}
		}
		s := &b.x.stage[k%2]
		if err := s.done.Synchronize(); err != nil {
			return err
		}
		copy(dst[k*stageChunk:], s.buf)
	}
	return nil
}

// stageWait waits for every copy that uses the pinned buffers.
func (x *extras) stageWait() error {
	var errs []error
	for i := range x.stage {
		if x.stage[i].buf != nil {
			errs = append(errs, x.stage[i].done.Synchronize())
		}
	}
	return errors.Join(errs...)
}

// closeExtras releases the pinned buffers, the capture stream and every live graph. It runs
// on the context goroutine, before the context is destroyed.
func (b *Backend) closeExtras() error {
	b.mu.Lock()
	graphs := b.x.graphs
	b.x.graphs = nil
	b.mu.Unlock()
	var errs []error
	for g := range graphs {
		errs = append(errs, g.destroy())
	}
	errs = append(errs, b.x.stageWait())
	b.mu.Lock()
	mapped := b.x.mapped
	b.x.mapped = nil
	b.mu.Unlock()
	for _, p := range mapped {
		errs = append(errs, check(C.cuMemFreeHost(p)))
	}
	for i := range b.x.stage {
		s := &b.x.stage[i]
		if s.buf == nil {
			continue
		}
		errs = append(errs, check(C.cuMemFreeHost(unsafe.Pointer(&s.buf[0]))), cu.DestroyEvent(&s.done))
		s.buf = nil
	}
	if b.x.capStream != (cu.Stream{}) {
		errs = append(errs, b.x.capStream.Destroy())
	}
	b.x.destroyEvents()
	return errors.Join(errs...)
}

// Copy copies n bytes from src to dst, both inside allocations, on the device (cuMemcpyDtoD)
// in issue order with launches. It does not wait for the copy: Sync does.
func (b *Backend) Copy(dst, src device.Ptr, n int64) error {
	if n == 0 {
		return nil
	}
	if err := b.inside(src, n); err != nil {
		return err
	}
	if err := b.inside(dst, n); err != nil {
		return err
	}
	return b.do("copy", fmt.Sprintf("%#x+%d to %#x", uint64(src), n, uint64(dst)), func() error {
		return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), n, b.x.launchStream())
	})
}

// Time runs f, which should enqueue device work (launches, copies), and returns the device
// time from the end of the work enqueued before f to the end of the work f enqueued,
// measured with two events on the NULL stream; it waits for that work. Work enqueued before f
// keeps the device busy while f enqueues, so the host's launch overhead is then excluded.
func (b *Backend) Time(f func() error) (time.Duration, error) {
	var start, stop cu.Event
	err := b.do("time", "start", func() error {
		var err error
		if start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return err
		}
		if stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			_ = cu.DestroyEvent(&start)
			return err
		}
		if err := start.Record(cu.Stream{}); err != nil {
			_ = cu.DestroyEvent(&start)
			_ = cu.DestroyEvent(&stop)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	ferr := f()
	var ms float64
	err = b.do("time", "stop", func() error {
		defer cu.DestroyEvent(&start)
		defer cu.DestroyEvent(&stop)
		if err := stop.Record(cu.Stream{}); err != nil {
			return err
		}
		if err := stop.Synchronize(); err != nil {
			return err
		}
		var err error
		ms, err = start.Elapsed(stop)
		return err
	})
	if ferr != nil {
		return 0, ferr
	}
	return time.Duration(ms * float64(time.Millisecond)), err
}

// Info describes a backend's device.
type Info struct {
	Name         string `json:"name"`
	Major        int    `json:"major"` // compute capability
	Minor        int    `json:"minor"`
	SMs          int    `json:"sms"`            // multiprocessors
	TotalMem     int64  `json:"total_mem"`      // bytes of device memory
	SharedOptin  int    `json:"shared_optin"`   // bytes of shared memory a block may opt in to
	L2           int    `json:"l2"`             // bytes of L2 cache
	MemClockKHz  int    `json:"mem_clock_khz"`  // peak memory clock
	BusWidthBits int    `json:"bus_width_bits"` // global memory bus width
	Driver       int    `json:"driver"`         // driver API version, e.g. 12080
}

// PeakBandwidth is the memory bandwidth the clock and bus width imply (two transfers per
// clock), in bytes per second: the datasheet figure, not a measurement.
func (i Info) PeakBandwidth() float64 {
	return 2 * float64(i.MemClockKHz) * 1e3 * float64(i.BusWidthBits) / 8
}

// Info returns the device's properties.
func (b *Backend) Info() (Info, error) {
	var in Info
	err := b.do("info", fmt.Sprint(b.ordinal), func() error {
		dev, err := cu.GetDevice(b.ordinal)
		if err != nil {
			return err
		}
		if in.Name, err = dev.Name(); err != nil {
			return err
		}
		if in.Major, in.Minor, err = dev.ComputeCapability(); err != nil {
			return err
		}
		if in.TotalMem, err = dev.TotalMem(); err != nil {
			return err
		}
		// one attribute at a time: a driver that no longer reports one (the memory clock, say)
		// leaves that field 0 rather than failing the rest
		for _, f := range []struct {
			attr cu.DeviceAttribute
			dst  *int
		}{{cu.MultiprocessorCount, &in.SMs}, {cu.L2CacheSize, &in.L2}, {cu.MemoryClockRate, &in.MemClockKHz},
			{cu.GlobalMemoryBusWidth, &in.BusWidthBits}} {
			if v, err := dev.Attribute(f.attr); err == nil {
				*f.dst = v
			}
		}
		if in.SharedOptin, err = b.sharedOptin(); err != nil {
			return err
		}
		in.Driver = cu.Version()
		return nil
	})
	return in, err
}

// SharedOptin is the shared memory a block may opt in to, in bytes.
func (b *Backend) SharedOptin() (int, error) { return b.sharedOptin() }

// Multiprocessors is the device's SM count: the megakernel runs one thread block on each.
func (b *Backend) Multiprocessors() (int, error) {
	in, err := b.Info()
	return in.SMs, err
}

// ResidentBlocks is how many thread blocks of kernel k, launched with args, the device can
// hold at once (the occupancy calculator's blocks per SM, times the SMs): a persistent kernel
// whose blocks wait for each other must not launch more. (Other work on the device — another
// process, MPS limits — can still leave fewer resident.)
func (b *Backend) ResidentBlocks(k device.Spec, args any) (int, error) {
	g, err := k.Geometry(args)
	if err != nil {
		return 0, err
	}
	fn, err := b.function(k.Module(), k.Entry())
	if err != nil {
		return 0, err
	}
	sms, err := b.Multiprocessors()
	if err != nil {
		return 0, err
	}
	if g.Shared > maxStaticShared { // the occupancy of a launch that opts in counts only once it has
		if err := b.allowShared(fn, g.Shared); err != nil {
			return 0, err
		}
	}
	var per int
	err = b.do("occupancy", k.Entry(), func() error {
		var err error
		per, err = fn.MaxActiveBlocksPerMultiProcessor(int(g.Block.X*g.Block.Y*g.Block.Z), int64(g.Shared))
		return err
	})
	return per * sms, err
}

// TotalMemory is the device's memory in bytes (what pipeline planning divides a model by).
func (b *Backend) TotalMemory() (int64, error) {
	in, err := b.Info()
	return in.TotalMem, err
}

// Mark records a CUDA event after the work enqueued so far (device.Timeline). Events are
// pooled: ReleaseMarks returns them for reuse, and Close destroys them.
func (b *Backend) Mark() (device.Mark, error) {
	var m device.Mark
	err := b.do("time", "mark", func() error {
		var ev cu.Event
		if n := len(b.x.freeEvents); n > 0 {
			ev, b.x.freeEvents = b.x.freeEvents[n-1], b.x.freeEvents[:n-1]
		} else {
			var err error
			if ev, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
				return err
			}
		}
		if err := ev.Record(b.x.launchStream()); err != nil {
			b.x.freeEvents = append(b.x.freeEvents, ev)
			return err
		}
		if b.x.marks == nil {
			b.x.marks = map[device.Mark]cu.Event{}
		}
		b.x.nextMark++
		m = b.x.nextMark
		b.x.marks[m] = ev
		return nil
	})
	return m, err
}

// Elapsed waits for mark b's event and returns the device time from mark a's to it.
func (b *Backend) Elapsed(a, c device.Mark) (time.Duration, error) {
	var ms float64
	err := b.do("time", "elapsed", func() error {
		ea, ok := b.x.marks[a]
		ec, ok2 := b.x.marks[c]
		if !ok || !ok2 {
			return fmt.Errorf("unknown mark %d or %d", a, c)
		}
		if err := ec.Synchronize(); err != nil {
			return err
		}
		var err error
		ms, err = ea.Elapsed(ec)
		return err
	})
	return time.Duration(ms * float64(time.Millisecond)), err
}

// ReleaseMarks returns the marks' events to the pool.
func (b *Backend) ReleaseMarks(marks ...device.Mark) error {
	return b.do("time", "release", func() error {
		for _, m := range marks {
			if ev, ok := b.x.marks[m]; ok {
				delete(b.x.marks, m)
				b.x.freeEvents = append(b.x.freeEvents, ev)
			}
		}
		return nil
	})
}

// destroyEvents destroys the pooled and outstanding events (on the context goroutine, at
// Close).
func (x *extras) destroyEvents() {
	for _, ev := range x.marks {
		_ = cu.DestroyEvent(&ev)
	}
	for i := range x.freeEvents {
		_ = cu.DestroyEvent(&x.freeEvents[i])
	}
	x.marks, x.freeEvents = nil, nil
}
