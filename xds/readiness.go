package xds

import (
	"context"
	"sync/atomic"
	"time"
)

// readiness is whether the first Apply happened (see doc.go,
// "Readiness"). readyNs, the unix nanos of that Apply (0: not yet), is
// read by anyone at any time; ready is closed then, for the requests
// waiting for it. Only the first Apply writes either, under Server.mu.
type readiness struct {
	readyNs atomic.Int64
	ready   chan struct{}
}

// Ready reports whether the first Apply happened, i.e. whether the server
// answers requests.
func (r *readiness) Ready() bool { return r.readyNs.Load() != 0 }

// readyAt is when the first Apply happened, zero before.
func (r *readiness) readyAt() time.Time {
	if ns := r.readyNs.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// markReady records the first Apply. Server.mu held, once.
func (r *readiness) markReady(now time.Time) {
	r.readyNs.Store(now.UnixNano())
	close(r.ready)
}

// wait returns once the server is ready, true, or once ctx ends, false.
func (r *readiness) wait(ctx context.Context) bool {
	if r.Ready() {
		return true
	}
	select {
	case <-r.ready:
		return true
	case <-ctx.Done():
		return false
	}
}
