package perf

import (
	"fmt"
	"strings"
)

// Card is a GPU as the model sees it. Every figure is named here, once, with where it comes
// from; the ones marked "to calibrate" are estimates that the first GPU run on that card
// replaces (the GPU check prints measured against predicted per kernel).
type Card struct {
	Name string
	Arch int // the SASS architecture its facts are for: 90, 80 (37: none yet)
	SMs  int
	// ClockGHz is the SM clock the cycle counts are converted at.
	ClockGHz float64
	// BandwidthGBs is the bandwidth of the floor: the device-to-device copy rate measured on
	// the card where known (bytes read + written per second), else an estimate from the
	// datasheet's peak (DatasheetGBs).
	BandwidthGBs float64
	DatasheetGBs float64
	L2Bytes      int64
	// L2GBs is the rate the SMs read lines the L2 already holds, in GB/s (0: not known).
	L2GBs float64

	MaxWarpsPerSM  int
	MaxBlocksPerSM int
	RegistersPerSM int
	SharedPerSM    int // bytes of shared memory blocks can use, per SM
	SharedReserved int // bytes the driver reserves per block (on top of the block's own)
	Schedulers     int // warp instructions issued per cycle per SM

	// Latencies in cycles, under load, as a warp waits for them.
	DRAMLatency    int
	L2Latency      int
	SharedLatency  int
	ShuffleLatency int
	ConstLatency   int
	SyncLatency    int

	// LaunchUS is the gap one kernel launch adds between dependent kernels in a stream,
	// reported beside a prediction, never in it.
	LaunchUS float64

	// FP32PerSM is the float32 fused multiply-adds an SM completes per cycle: the compute
	// ceiling of a roofline (2 flops each, at ClockGHz, on every SM).
	FP32PerSM int
}

// PeakFlops is the card's float32 peak in flops per second (FMA counted as two).
func (c Card) PeakFlops() float64 {
	return 2 * float64(c.FP32PerSM) * float64(c.SMs) * c.ClockGHz * 1e9
}

// Cards are the cards the model knows, by name.
//
// Sources:
//   - SMs, clocks, bandwidth, L2: NVIDIA's H100/H200 and A100 datasheets and architecture
//     whitepapers (H100 SXM5 and H200 SXM: 132 SMs of GH100, boost 1.98 GHz, 50 MB L2,
//     3.35 and 4.8 TB/s; A100 SXM4 80 GB: 108 SMs, 1.41 GHz, 40 MB L2, 2.04 TB/s; K80: two
//     GK210 dies of 13 SMX at up to 875 MHz, 240 GB/s each).
//   - The H200's copy rate, 4.3 TB/s: measured on the H200 this project uses
//     (shared/notes/perf-anchors.md, "practical floor"). The H100's and A100's are estimates
//     at 88 % of their datasheet peak (to calibrate).
//   - Occupancy limits: the CUDA C Programming Guide's table of compute-capability limits
//     (64 warps, 32 blocks, 64 K registers per SM on 8.0 and 9.0; 228 KB and 164 KB of
//     shared memory per SM, 1 KB reserved per block; 3.7: 16 blocks, 128 K registers, 112 KB).
//   - Latencies: microbenchmarks of Ampere and Hopper (Jia et al., "Dissecting the NVIDIA
//     Volta/Ampere GPU architecture via microbenchmarking"; Luo et al., arXiv 2402.13499,
//     "Benchmarking and dissecting the Nvidia Hopper GPU architecture"): L1/shared ~30
//     cycles, L2 ~200 (A100) to ~260 (H100) cycles, DRAM ~480–600 cycles unloaded; the DRAM
//     figures here add the queueing of a loaded memory system (to calibrate). Shuffles ~25
//     cycles, dependent arithmetic ~4 (sass/analyse.go).
//   - The L1 data path (sass/analyse.go): the tag stage looks up 4 cache lines (16 sectors) a
//     cycle (NVIDIA's Greg Smith on the Volta L1, forums.developer.nvidia.com/t/49571), the
//     data stage reads 32 banks of 4 bytes a cycle, and an SM issues one memory instruction
//     a cycle (32 load/store units).
//   - FP32 lanes: the CUDA C Programming Guide's arithmetic instruction throughput table (32-bit
//     floating-point add, multiply, multiply-add: 128 results per clock per SM on 9.0, 64 on
//     8.0, 192 on 3.7).
//   - Launch gap: ~1.3 µs per kernel even with CUDA graphs on an H100 (Hazy Research, "Look
//     Ma, No Bubbles!"); 2 µs for a stream of eager launches (to calibrate).
//   - L2 read rate: 75 % of the peak per SM and clock of Table 3 of Ultrasonics Sonochemistry
//     99 (2023) 106546 (PMC10448217) (8 986 GB/s for a full 144-SM H100 at 1 755 MHz, 7 219
//     GB/s for a 128-SM A100 at 1 410 MHz), scaled to the card's SMs and clock (to calibrate).
var Cards = map[string]Card{
	"H200": {Name: "H200", Arch: 90, SMs: 132, ClockGHz: 1.98, BandwidthGBs: 4300, DatasheetGBs: 4800, L2Bytes: 50 << 20, L2GBs: 7000,
		MaxWarpsPerSM: 64, MaxBlocksPerSM: 32, RegistersPerSM: 65536, SharedPerSM: 228 << 10, SharedReserved: 1 << 10, Schedulers: 4,
		DRAMLatency: 800, L2Latency: 260, SharedLatency: 30, ShuffleLatency: 25, ConstLatency: 12, SyncLatency: 20, LaunchUS: 2, FP32PerSM: 128},
	"H100": {Name: "H100", Arch: 90, SMs: 132, ClockGHz: 1.98, BandwidthGBs: 2950, DatasheetGBs: 3350, L2Bytes: 50 << 20, L2GBs: 7000,
		MaxWarpsPerSM: 64, MaxBlocksPerSM: 32, RegistersPerSM: 65536, SharedPerSM: 228 << 10, SharedReserved: 1 << 10, Schedulers: 4,
		DRAMLatency: 800, L2Latency: 260, SharedLatency: 30, ShuffleLatency: 25, ConstLatency: 12, SyncLatency: 20, LaunchUS: 2, FP32PerSM: 128},
	"A100": {Name: "A100", Arch: 80, SMs: 108, ClockGHz: 1.41, BandwidthGBs: 1790, DatasheetGBs: 2039, L2Bytes: 40 << 20, L2GBs: 4500,
		MaxWarpsPerSM: 64, MaxBlocksPerSM: 32, RegistersPerSM: 65536, SharedPerSM: 164 << 10, SharedReserved: 1 << 10, Schedulers: 4,
		DRAMLatency: 650, L2Latency: 200, SharedLatency: 30, ShuffleLatency: 25, ConstLatency: 12, SyncLatency: 20, LaunchUS: 2, FP32PerSM: 64},
	"K80": {Name: "K80", Arch: 37, SMs: 13, ClockGHz: 0.875, BandwidthGBs: 170, DatasheetGBs: 240, L2Bytes: 1536 << 10,
		MaxWarpsPerSM: 64, MaxBlocksPerSM: 16, RegistersPerSM: 131072, SharedPerSM: 112 << 10, Schedulers: 4,
		DRAMLatency: 400, L2Latency: 230, SharedLatency: 30, ShuffleLatency: 30, ConstLatency: 12, SyncLatency: 20, LaunchUS: 5, FP32PerSM: 192},
}

// DefaultCard is the card the targets are set on.
const DefaultCard = "H200"

// CardFor returns the card called name (case-insensitive), or the card of an SM number ("90":
// the H200, "80": the A100).
func CardFor(name string) (Card, error) {
	switch name {
	case "", "90", "sm_90":
		return Cards[DefaultCard], nil
	case "80", "sm_80":
		return Cards["A100"], nil
	case "37", "sm_37":
		return Cards["K80"], nil
	}
	for k, c := range Cards {
		if strings.EqualFold(k, name) {
			return c, nil
		}
	}
	return Card{}, fmt.Errorf("perf: no card %q (H200, H100, A100, K80, or an SM number: 90, 80, 37)", name)
}

// bytesPerCycle is the DRAM bandwidth one SM's share of the card gets per SM cycle.
func (c Card) bytesPerCycle() float64 {
	return c.BandwidthGBs * 1e9 / float64(c.SMs) / (c.ClockGHz * 1e9)
}
