package megakernel

import (
	"fmt"
	"sync"

	"verity/device"
)

// VM interprets streams on the CPU: one goroutine per SM queue, each running its parts with
// the kernels' twins over Mem (the CPU backend's memory). Part p of an instruction runs the
// twin with a parallel-for that covers only device.Part(n, p, parts) of the twin's index
// range [0, n), which the twins' contract makes exactly that part's share of the writes.
type VM struct {
	Mem device.Memory
}

// Run decodes a stream and runs it to the end. On an error every SM stops at its next part
// and Run returns the first error (of the lowest instruction).
func (vm *VM) Run(stream []byte) error {
	s, err := Decode(stream)
	if err != nil {
		return err
	}
	return vm.RunSchedule(s)
}

// RunSchedule runs a decoded (or freshly built) schedule.
func (vm *VM) RunSchedule(s *Schedule) error {
	kernels := Kernels()
	args := make([]any, len(s.Instrs))
	for i, in := range s.Instrs {
		a, err := device.Unflatten(kernels[in.Kernel].ArgsType(), in.Params)
		if err != nil {
			return fmt.Errorf("megakernel: instruction %d %s: %w", i, in.Name, err)
		}
		args[i] = a
	}
	st := &vmState{s: s, done: make([]int, len(s.Instrs))}
	st.cond = sync.NewCond(&st.mu)
	var wg sync.WaitGroup
	for _, q := range s.Queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, it := range q {
				in := &s.Instrs[it.Instr]
				if !st.wait(in.Deps) {
					return
				}
				x := &device.Exec{Mem: vm.Mem, Workers: 1, For: func(n int, body func(lo, hi int)) {
					if lo, hi := device.Part(n, int(it.Part), in.Parts); lo < hi {
						body(lo, hi)
					}
				}}
				err := kernels[in.Kernel].RunTwin(x, args[it.Instr])
				st.finish(int(it.Instr), err)
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if st.err != nil {
		return fmt.Errorf("megakernel: instruction %d %s: %w", st.errAt, s.Instrs[st.errAt].Name, st.err)
	}
	return nil
}

// vmState holds the completion counters the SMs wait on.
type vmState struct {
	s     *Schedule
	mu    sync.Mutex
	cond  *sync.Cond
	done  []int // finished parts per instruction
	err   error
	errAt int
}

// wait blocks until every part of each dependency has finished; false if the run failed.
func (st *vmState) wait(deps []int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		if st.err != nil {
			return false
		}
		ready := true
		for _, d := range deps {
			if st.done[d] < st.s.Instrs[d].Parts {
				ready = false
				break
			}
		}
		if ready {
			return true
		}
		st.cond.Wait()
	}
}

func (st *vmState) finish(i int, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		if st.err == nil || i < st.errAt {
			st.err, st.errAt = err, i
		}
	} else {
		st.done[i]++
	}
	st.cond.Broadcast()
}
