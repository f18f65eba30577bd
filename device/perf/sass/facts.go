package sass

import "encoding/json"

// Facts is what the compiler emitted for one kernel entry on one architecture, as the model
// needs it: resources (from ptxas), and per region of the machine code — the code outside
// every loop, and each loop's own body (its inner loops excluded) — what one execution by one
// warp issues, waits for and moves. The generator (tools/kernelfacts) computes them from the
// SASS of the committed PTX; facts_sm*.go hold them.
type Facts struct {
	Entry     string
	Arch      int      // 90: sm_90, 80: sm_80
	Registers int      // per thread
	Shared    int      `json:",omitempty"` // static shared memory, bytes per block
	Local     int      `json:",omitempty"` // stack frame per thread, bytes (0 without spills)
	Instrs    int      // instructions in the function
	Regions   []Region `json:",omitempty"`
}

// Region is straight code (Loop false: every instruction outside the function's loops,
// executed once per warp) or one loop's body (executed once per iteration).
type Region struct {
	Loop       bool `json:",omitempty"`
	Start, End int  // SASS addresses of its first and last instruction
	Depth      int  `json:",omitempty"` // loop nesting depth (0: straight code, 1: an outermost loop)
	Instrs     int  // instructions issued (NOPs excluded; both arms of a branch counted)
	// Path is one warp's longest chain of waits through one execution: for a loop, the
	// steady-state difference between two iterations.
	Path   Path
	Access []Access `json:",omitempty"`
}

// Path counts what a warp's critical path through a region waits for. Its length on a card
// is Σ count × that card's latency (Card.Latency).
type Path struct {
	Issue   int `json:",omitempty"` // cycles of back-to-back issue
	ALU     int `json:",omitempty"` // cycles waiting for arithmetic results
	Shared  int `json:",omitempty"` // shared-memory loads waited for
	Shuffle int `json:",omitempty"` // warp shuffles waited for
	Const   int `json:",omitempty"` // indexed constant loads waited for
	Local   int `json:",omitempty"` // local-memory (spill) loads waited for
	Sync    int `json:",omitempty"` // block barriers
	// Global counts the waits for global loads by kernel parameter index (the parameter the
	// address is computed from, -1 when unknown).
	Global []Waits `json:",omitempty"`
}

// Waits is a count of waits for loads from one kernel parameter (-1: unknown).
type Waits struct {
	Param int
	N     int
}

// AccessOp is what a memory instruction does.
type AccessOp uint8

const (
	Load AccessOp = iota
	Store
	Atomic   // read-modify-write (atom, red)
	Prefetch // a hint that asks the L2 for a line (prefetch.global.L2: CCTL.E.PML2); moves nothing to the SM
)

func (o AccessOp) String() string { return [...]string{"load", "store", "atomic", "prefetch"}[o] }

// Space is a memory space.
type Space uint8

const (
	Global Space = iota
	Shared
	Local
)

func (s Space) String() string { return [...]string{"global", "shared", "local"}[s] }

// Access is one memory instruction of a region, for one warp (32 lanes).
type Access struct {
	Addr  int
	Op    AccessOp
	Space Space
	Param int // kernel parameter the address derives from; -1 unknown
	Width int // bytes per lane
	// Pattern reports whether the lanes' addresses were followed; without it the access is
	// taken to be coalesced (lanes contiguous).
	Pattern bool
	Bytes   int // distinct bytes the warp touches
	Sectors int // distinct 32-byte sectors (global, local)
	// Cycles is the L1/shared data path's cycles (wavefronts) for the request: for global
	// memory the larger of sectors/4 (128 bytes a cycle) and lines/4 (four tag look-ups a
	// cycle); for shared memory the bank conflicts' degree summed over the request's phases.
	Cycles int
}

// MarshalJSON writes an access as the array [Addr, Op, Space, Param, Width, Pattern (0 or 1),
// Bytes, Sectors, Cycles]: the facts files hold many.
func (a Access) MarshalJSON() ([]byte, error) {
	p := 0
	if a.Pattern {
		p = 1
	}
	return json.Marshal([9]int{a.Addr, int(a.Op), int(a.Space), a.Param, a.Width, p, a.Bytes, a.Sectors, a.Cycles})
}

// UnmarshalJSON reads MarshalJSON's array.
func (a *Access) UnmarshalJSON(b []byte) error {
	var v [9]int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Access{Addr: v[0], Op: AccessOp(v[1]), Space: Space(v[2]), Param: v[3], Width: v[4], Pattern: v[5] != 0,
		Bytes: v[6], Sectors: v[7], Cycles: v[8]}
	return nil
}
