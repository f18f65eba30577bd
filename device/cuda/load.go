//go:build cuda

package cuda

// Loading modules: which code a module is loaded from (the device's own cubin, else the PTX,
// which the driver's JIT compiles), how long that took, and what the JIT said.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

// verity_load loads image (a cubin, or NUL-terminated PTX) with the JIT's logs and wall time.
// CU_JIT_WALL_TIME is an output: the driver either overwrites the option's slot with the float
// or writes it where the slot points (what cuLinkCreate does); both are read.
static CUresult verity_load(CUmodule *mod, const void *image, char *info, char *err, unsigned int logSize, float *wall) {
	CUjit_option opts[5] = {CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[5];
	float pointed = -1;
	vals[0] = &pointed;
	vals[1] = info;
	vals[2] = (void *)(uintptr_t)logSize;
	vals[3] = err;
	vals[4] = (void *)(uintptr_t)logSize;
	CUresult r = cuModuleLoadDataEx(mod, image, 5, opts, vals);
	if (vals[0] != (void *)&pointed) {
		memcpy(wall, &vals[0], sizeof *wall);
	} else {
		*wall = pointed;
	}
	return r;
}
*/
import "C"

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"verity/device"
	"verity/ptx"
)

// ModuleLoad records how one module was loaded.
type ModuleLoad struct {
	Module string `json:"module"`
	// Code is what was loaded: "sm_90 cubin" (package ptx's machine code for the device's
	// architecture) or "PTX" (compiled by the driver's JIT).
	Code string `json:"code"`
	// Why says why the PTX was loaded rather than a cubin ("" for a cubin).
	Why    string  `json:"why,omitempty"`
	LoadMS float64 `json:"load_ms"` // wall time of cuModuleLoadDataEx
	// JITMS is the JIT's own wall time as the driver reports it (CU_JIT_WALL_TIME); -1 when it
	// reports none. A PTX load whose JIT time is far below LoadMS was found in the driver's
	// compute cache.
	JITMS float64 `json:"jit_ms,omitempty"`
	Log   string  `json:"log,omitempty"`   // the JIT's info log
	Error string  `json:"error,omitempty"` // a failed load's error, with the JIT's error log
	// Kernels are the loaded entries' attributes, by name (Backend.KernelAttributes fills it).
	Kernels map[string]KernelAttributes `json:"kernels,omitempty"`
}

// KernelAttributes are a loaded kernel's resources as the driver reports them
// (cuFuncGetAttribute).
type KernelAttributes struct {
	Registers     int `json:"registers"`       // per thread
	StaticShared  int `json:"static_shared"`   // bytes of statically allocated shared memory
	Local         int `json:"local"`           // bytes of local memory per thread (stack, spills)
	MaxThreads    int `json:"max_threads"`     // the most threads per block it can launch with
	BinaryVersion int `json:"binary_version"`  // the machine code's architecture, e.g. 90
	PTXVersion    int `json:"ptx_version"`     // the PTX architecture it was compiled from, e.g. 80
	MaxDynShared  int `json:"max_dyn_shared"`  // dynamic shared memory it may launch with now
	ConstBytes    int `json:"const,omitempty"` // bytes of constant memory
}

// Code policies: VERITY_CUDA_CODE chooses what Open's backend loads.
const (
	codeAuto  = ""      // the device's cubin if package ptx has one, else the PTX
	codePTX   = "ptx"   // always the PTX, JIT-compiled
	codeCubin = "cubin" // only cubins: a module without one for the device is unsupported
)

func codePolicy() (string, error) {
	switch p := strings.ToLower(os.Getenv("VERITY_CUDA_CODE")); p {
	case codeAuto, "auto":
		return codeAuto, nil
	case codePTX, codeCubin:
		return p, nil
	default:
		return "", fmt.Errorf("VERITY_CUDA_CODE=%q: want ptx, cubin or auto", p)
	}
}

// trace reports module loads on stderr when VERITY_CUDA_TRACE is set, so that a slow JIT is
// seen as one rather than as a hang.
var trace = os.Getenv("VERITY_CUDA_TRACE") != ""

// codeName describes what a backend on an architecture loads, for its name.
func codeName(sm, policy string) string {
	if policy == codePTX {
		return "PTX (VERITY_CUDA_CODE=ptx)"
	}
	if _, _, err := ptx.Cubin("elementwise", sm); err == nil {
		return sm + " cubins"
	}
	return "PTX"
}

// load loads module stem: its cubin for the device's architecture if package ptx has one (and
// the policy allows), else its PTX, which the driver JIT-compiles. A cubin that fails to load
// falls back to the PTX, with the cubin's error in the record. A Kepler GPU cannot run the
// PTX: without a cubin the module is unsupported. A failure is returned in module.err.
func (b *Backend) load(stem string) *module {
	m := &module{entries: map[string]bool{}, funcs: map[string]cu.Function{}}
	why := ""
	if b.policy != codePTX {
		data, names, err := ptx.Cubin(stem, b.sm)
		if err == nil {
			rec, mod, lerr := b.loadImage(stem, b.sm+" cubin", data)
			if lerr == nil {
				m.mod, m.code, m.rec = mod, rec.Code, rec
				for _, n := range names {
					m.entries[n] = true
				}
				return m
			}
			why = fmt.Sprintf("the %s cubin did not load: %v", b.sm, lerr)
		} else {
			why = fmt.Sprintf("no %s cubin", b.sm)
		}
	} else {
		why = "VERITY_CUDA_CODE=ptx"
	}
	m.code = "PTX"
	if b.kepler || b.policy == codeCubin {
		m.code = b.sm + " cubin"
		m.rec = ModuleLoad{Module: stem, Code: m.code, Error: why}
		m.err = fmt.Errorf("cuda: load %s: %s: %w", stem, why, device.ErrUnsupported)
		return m
	}
	text, err := ptx.Module(stem)
	if err != nil {
		m.rec = ModuleLoad{Module: stem, Code: m.code, Why: why, Error: err.Error()}
		m.err = fmt.Errorf("cuda: load %s: %v: %w", stem, err, device.ErrUnsupported)
		return m
	}
	for _, e := range ptx.Entries() {
		if e.Module == stem {
			m.entries[e.Name] = true
		}
	}
	rec, mod, err := b.loadImage(stem, "PTX", append([]byte(text), 0))
	rec.Why = why
	m.rec = rec
	if err != nil {
		m.err = err
		return m
	}
	m.mod = mod
	return m
}

// loadImage loads a cubin or NUL-terminated PTX on the context goroutine and records it.
func (b *Backend) loadImage(stem, code string, image []byte) (ModuleLoad, cu.Module, error) {
	rec := ModuleLoad{Module: stem, Code: code}
	var mod cu.Module
	if trace {
		fmt.Fprintf(os.Stderr, "cuda: %s: loading module %s (%s, %d bytes)\n", b.name, stem, code, len(image))
	}
	err := b.do("load", stem+" "+code, func() error {
		img := C.CBytes(image)
		defer C.free(img)
		info := (*C.char)(C.calloc(logBytes, 1))
		defer C.free(unsafe.Pointer(info))
		elog := (*C.char)(C.calloc(logBytes, 1))
		defer C.free(unsafe.Pointer(elog))
		var wall C.float
		var cmod C.CUmodule
		start := time.Now()
		r := C.verity_load(&cmod, img, info, elog, logBytes, &wall)
		rec.LoadMS = float64(time.Since(start)) / float64(time.Millisecond)
		rec.JITMS = float64(wall)
		if math.IsNaN(rec.JITMS) || math.IsInf(rec.JITMS, 0) || rec.JITMS < 0 || rec.JITMS > 1e7 {
			rec.JITMS = -1
		}
		rec.Log = strings.TrimSpace(C.GoString(info))
		if err := check(r); err != nil {
			return fmt.Errorf("%w\n%s", err, jitLog([]byte(C.GoString(elog)), []byte(rec.Log)))
		}
		mod = wrapModule(cmod)
		return nil
	})
	if err != nil {
		rec.Error = err.Error()
	}
	if code != "PTX" {
		rec.JITMS = 0 // nothing was compiled
	}
	if trace {
		if err != nil {
			fmt.Fprintf(os.Stderr, "cuda: %s: module %s (%s) failed after %.1f ms: %v\n", b.name, stem, code, rec.LoadMS, err)
		} else {
			fmt.Fprintf(os.Stderr, "cuda: %s: loaded module %s (%s) in %.1f ms (JIT %.1f ms)\n", b.name, stem, code, rec.LoadMS, rec.JITMS)
		}
	}
	b.mu.Lock()
	b.loads = append(b.loads, rec)
	b.mu.Unlock()
	return rec, mod, err
}

// cu.Module holds nothing but its CUmodule handle; wrapModule makes one. The arrays fail to
// compile if the sizes ever differ.
var (
	_ [unsafe.Sizeof(cu.Module{}) - unsafe.Sizeof(C.CUmodule(nil))]byte
	_ [unsafe.Sizeof(C.CUmodule(nil)) - unsafe.Sizeof(cu.Module{})]byte
)

func wrapModule(m C.CUmodule) cu.Module { return *(*cu.Module)(unsafe.Pointer(&m)) }

// Modules returns a record of every module load the backend has made, in order (a module
// whose cubin failed and whose PTX then loaded has two).
func (b *Backend) Modules() []ModuleLoad {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ModuleLoad(nil), b.loads...)
}

// LoadModule loads module stem now (as the first launch of one of its kernels would) and
// returns its record, with every entry's attributes.
func (b *Backend) LoadModule(stem string) (ModuleLoad, error) {
	var first string
	for _, e := range ptx.Entries() {
		if e.Module == stem {
			first = e.Name
			break
		}
	}
	if first == "" {
		return ModuleLoad{Module: stem}, fmt.Errorf("cuda: load %s: no such module: %w", stem, device.ErrUnsupported)
	}
	_, err := b.function(stem, first)
	b.mu.Lock()
	m := b.modules[stem]
	b.mu.Unlock()
	if m == nil {
		return ModuleLoad{Module: stem}, err
	}
	rec := m.rec
	if err != nil {
		return rec, err
	}
	rec.Kernels = map[string]KernelAttributes{}
	for _, e := range ptx.Entries() {
		if e.Module != stem || !m.entries[e.Name] {
			continue
		}
		a, err := b.KernelAttributes(stem, e.Name)
		if err != nil {
			return rec, err
		}
		rec.Kernels[e.Name] = a
	}
	return rec, nil
}

// KernelAttributes returns the driver's attributes of entry in module stem, loading it.
func (b *Backend) KernelAttributes(stem, entry string) (KernelAttributes, error) {
	fn, err := b.function(stem, entry)
	if err != nil {
		return KernelAttributes{}, err
	}
	var a KernelAttributes
	err = b.do("attributes", entry, func() error {
		f := rawFunction(fn)
		for _, at := range []struct {
			attr C.CUfunction_attribute
			dst  *int
		}{
			{C.CU_FUNC_ATTRIBUTE_NUM_REGS, &a.Registers},
			{C.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &a.StaticShared},
			{C.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &a.Local},
			{C.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &a.MaxThreads},
			{C.CU_FUNC_ATTRIBUTE_BINARY_VERSION, &a.BinaryVersion},
			{C.CU_FUNC_ATTRIBUTE_PTX_VERSION, &a.PTXVersion},
			{C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &a.MaxDynShared},
			{C.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &a.ConstBytes},
		} {
			var v C.int
			if err := check(C.cuFuncGetAttribute(&v, at.attr, f)); err != nil {
				return err
			}
			*at.dst = int(v)
		}
		return nil
	})
	return a, err
}

// jitLog joins the non-empty JIT logs (each NUL-terminated in its buffer).
func jitLog(bufs ...[]byte) string {
	var parts []string
	for _, buf := range bufs {
		if i := bytes.IndexByte(buf, 0); i >= 0 {
			buf = buf[:i]
		}
		if s := strings.TrimSpace(string(buf)); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "(no JIT log)"
	}
	return strings.Join(parts, "\n")
}
