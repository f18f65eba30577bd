package perf

import (
	"math"
	"os"
	"testing"

	"verity/device"
	"verity/device/perf/sass"
)

// probeFacts analyses the committed SASS of testdata/probes.cu (tools/kernelfacts compiles it).
func probeFacts(t *testing.T) map[string]*sass.Facts {
	t.Helper()
	text, err := os.Open("testdata/probes.sm_90.sass")
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	fns, err := sass.ParseSASS(text)
	if err != nil {
		t.Fatal(err)
	}
	ptx, err := os.ReadFile("testdata/probes.ptx")
	if err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile("testdata/probes.sm_90.ptxas")
	if err != nil {
		t.Fatal(err)
	}
	params, res := sass.PTXParams(string(ptx)), sass.ParseResources(string(report))
	out := map[string]*sass.Facts{}
	for i := range fns {
		f, err := sass.Analyse(&fns[i], sass.ParamSlots(sass.ParamBase(90), params[fns[i].Name]))
		if err != nil {
			t.Fatal(err)
		}
		r := res[f.Entry]
		f.Arch, f.Registers, f.Shared, f.Local = 90, r.Registers, r.Shared, r.Stack
		out[f.Entry] = f
	}
	if out["probe_copy"] == nil || out["probe_chain"] == nil {
		t.Fatalf("probes: got %d functions, want probe_copy and probe_chain", len(out))
	}
	return out
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// TestProbeCopy: a pure copy of 2 × 256 MiB with a 16-byte load and store per thread runs at
// the card's bandwidth: enough warps are resident that their loads in flight cover the DRAM
// latency, and each warp's one load per 1 KiB moved leaves the load/store unit idle.
func TestProbeCopy(t *testing.T) {
	f := probeFacts(t)["probe_copy"]
	const n = 1 << 24 // uint4s
	geo := device.Geometry{Grid: device.Dim3{X: n / 256, Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}
	tr := Traffic{Streams: []Stream{{Param: "x", Bytes: 16 * n}, {Param: "y", Bytes: 16 * n, Write: true}}}
	for _, name := range []string{"H200", "H100"} {
		c := Cards[name]
		p, err := Model(c, f, geo, tr, []string{"x", "y", "n"})
		if err != nil {
			t.Fatal(err)
		}
		floor := 32.0 * n / (c.BandwidthGBs * 1e3) // µs
		if p.Limiter != "dram" || !near(p.TimeUS, floor, 1e-9) || !near(p.FloorUS, floor, 1e-9) {
			t.Errorf("%s: copy %s; want the floor %.1f µs, DRAM-bound", name, p, floor)
		}
		// one 512-byte load a warp in flight, 64 warps an SM: 32 KB, more than Little's law needs
		if p.ResidentWarps != 64 || p.InFlight < p.Needed {
			t.Errorf("%s: %d resident warps, %.0f bytes in flight per SM, need %.0f", name, p.ResidentWarps, p.InFlight, p.Needed)
		}
		if p.Chain != 0 || p.MemInstrsPerKB != 2 {
			t.Errorf("%s: %v dependent loads, %v memory instructions per KB; want 0 (no loop) and 2", name, p.Chain, p.MemInstrsPerKB)
		}
	}
}

// TestProbeChain: every lane follows a list of 4096 links; each load waits for the one before,
// so the time is 4096 DRAM round trips, whatever the bandwidth.
func TestProbeChain(t *testing.T) {
	f := probeFacts(t)["probe_chain"]
	const steps = 4096
	geo := device.Geometry{Grid: device.Dim3{X: 1, Y: 1, Z: 1}, Block: device.Dim3{X: 32, Y: 1, Z: 1}}
	tr := Traffic{Streams: []Stream{{Param: "next", Bytes: 4 * steps}, {Param: "out", Bytes: 128, Write: true}}}
	for _, name := range []string{"H200", "A100"} {
		c := Cards[name]
		p, err := Model(c, f, geo, tr, []string{"next", "out", "steps"})
		if err != nil {
			t.Fatal(err)
		}
		// each link: a load (DRAM latency) and the address arithmetic before the next (4 cycles)
		want := float64(steps) * float64(c.DRAMLatency+4) / (c.ClockGHz * 1e3)
		if p.Limiter != "latency" || !near(p.TimeUS, want, 0.02) {
			t.Errorf("%s: chain %s; want %.1f µs, latency-bound", name, p, want)
		}
		if p.Chain != 16 { // the loop is unrolled 16 times: 16 loads in a row, each waiting
			t.Errorf("%s: %d dependent loads in the hot loop, want 16", name, p.Chain)
		}
	}
}
