package cpu

import "syscall"

// osYield gives the processor to another thread (of this process or another) that is ready
// to run, if any. It is a Syscall, not a RawSyscall: a loop of raw yields spends almost all its
// time in the kernel and takes the runtime's preemption signal on the way out, in assembly
// where the goroutine cannot be stopped. A caller of For waiting for a worker that a garbage
// collection had already stopped then held the collection's stop of the world for hundreds of
// milliseconds; through Syscall the runtime sees the thread in the kernel and stops it there.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
