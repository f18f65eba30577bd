//go:build cuda

package cuda

/*
#include <cuda.h>
*/
import "C"

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"
)

// Graph is a captured sequence of launches and copies, instantiated for replay (a CUDA
// graph). It replays the launches with the arguments they were captured with.
type Graph struct {
	b     *Backend
	graph C.CUgraph
	exec  C.CUgraphExec
	nodes int
}

// Capture records the kernel launches (and Copy calls) made on b while f runs into a graph
// instead of running them, and instantiates it. Launch arguments, device addresses included,
// are fixed at capture. While f runs, every other backend call (Alloc, Write, Read, Sync, ...)
// fails, from any goroutine; launches from any goroutine are captured. An error from f, or a
// failed launch, discards the capture.
func (b *Backend) Capture(f func() error) (*Graph, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, errors.New("cuda: capture: backend closed")
	case b.x.capturing:
		b.mu.Unlock()
		return nil, errors.New("cuda: capture: a capture is already under way")
	}
	b.x.capturing = true
	b.mu.Unlock()
	done := func() {
		b.mu.Lock()
		b.x.capturing = false
		b.mu.Unlock()
	}

	var stream C.CUstream
	err := b.do("capture", "begin", func() error {
		if b.x.capStream == (cu.Stream{}) {
			s, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				return err
			}
			b.x.capStream = s
		}
		stream = rawStream(b.x.capStream)
		// Relaxed: module loads on the way to a first launch are fine; the backend itself
		// refuses everything that is not a launch or a copy (extras.refuse).
		if err := check(C.cuStreamBeginCapture(stream, C.CU_STREAM_CAPTURE_MODE_RELAXED)); err != nil {
			return err
		}
		b.x.active = true
		return nil
	})
	if err != nil {
		done()
		return nil, err
	}
	var ferr error
	func() {
		defer func() {
			if r := recover(); r != nil {
				ferr = fmt.Errorf("cuda: capture: panic: %v", r)
			}
		}()
		ferr = f()
	}()
	g := &Graph{b: b}
	err = b.do("capture", "end", func() error {
		// Ending the capture also reports a launch that failed to be captured.
		b.x.active = false
		if err := check(C.cuStreamEndCapture(stream, &g.graph)); err != nil {
			return err
		}
		if ferr != nil {
			return nil
		}
		var n C.size_t
		if err := check(C.cuGraphGetNodes(g.graph, nil, &n)); err != nil {
			return err
		}
		g.nodes = int(n)
		return check(C.cuGraphInstantiateWithFlags(&g.exec, g.graph, 0))
	})
	done()
	if ferr != nil || err != nil {
		if g.graph != nil {
			_ = b.do("capture", "discard", g.destroy)
		}
		if ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	b.mu.Lock()
	if b.x.graphs == nil {
		b.x.graphs = map[*Graph]struct{}{}
	}
	b.x.graphs[g] = struct{}{}
	b.mu.Unlock()
	return g, nil
}

// Nodes is the number of operations (launches, copies) the graph holds.
func (g *Graph) Nodes() int { return g.nodes }

// Launch enqueues one replay of the graph on the NULL stream, in issue order with launches;
// Sync waits for it.
func (g *Graph) Launch() error {
	if !g.live() {
		return errors.New("cuda: graph launch: graph destroyed")
	}
	return g.b.do("graph", "launch", func() error { return check(C.cuGraphLaunch(g.exec, nil)) })
}

// Destroy releases the graph. Close destroys the graphs still live.
func (g *Graph) Destroy() error {
	if !g.live() {
		return nil
	}
	b := g.b
	b.mu.Lock()
	delete(b.x.graphs, g)
	b.mu.Unlock()
	return b.do("graph", "destroy", g.destroy)
}

func (g *Graph) live() bool {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	_, ok := g.b.x.graphs[g]
	return ok
}

// destroy releases the executable graph and the graph (on the context goroutine).
func (g *Graph) destroy() error {
	var errs []error
	if g.exec != nil {
		errs = append(errs, check(C.cuGraphExecDestroy(g.exec)))
		g.exec = nil
	}
	if g.graph != nil {
		errs = append(errs, check(C.cuGraphDestroy(g.graph)))
		g.graph = nil
	}
	return errors.Join(errs...)
}
