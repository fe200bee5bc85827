package consul

import (
	"context"
	"sync"
)

// gate lets the goroutines that ask the agent wait while the probe finds it
// down: wait returns at once while the gate is open.
type gate struct {
	mu sync.Mutex
	// open is closed while the gate is open; shutting the gate replaces
	// it with a new channel, which opening closes.
	open chan struct{}
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

// wait returns true once the gate is open, false when ctx ended first.
func (g *gate) wait(ctx context.Context) bool {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}
