package device

import "time"

// Timeline is what a backend that runs its work asynchronously (a GPU) may offer to time
// kernels without waiting after each one: marks recorded in its stream of work, in issue order,
// and the device time between two of them. Executors use it for per-op profiles; a backend
// without one is timed by waiting after each launch.
type Timeline interface {
	// Mark records a point after all the work enqueued so far.
	Mark() (Mark, error)
	// Elapsed waits until the work before mark b is done and returns the device time from a
	// to b.
	Elapsed(a, b Mark) (time.Duration, error)
	// ReleaseMarks frees marks; a released mark may be handed out again.
	ReleaseMarks(marks ...Mark) error
}

// Mark is a point recorded in a backend's stream of work (Timeline).
type Mark uint64
