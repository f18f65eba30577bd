package cpu

import "syscall"

// osYield gives the processor to another thread (of this process or another) that is ready
// to run, if any.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
