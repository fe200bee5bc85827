package consul

import (
	"context"
	"sync"
	"time"
)

// generation is the context every read and blocking query runs under,
// renewed when the source learns that what failed may now work (the agent
// answers again, the token changed): renewing cuts requests stuck on
// connections of the failed period and ends every backoff wait, so that
// everything is asked again at once. Its marks tell the blocking queries
// where to ask from next (see poll).
type generation struct {
	parent context.Context

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	marks  queryMarks
}

// queryMarks count two kinds of renewal. After a reset (Consul lost its
// state) the blocking queries start over from index 0 and forget the
// indexes they saw: a query blocked on an index of the old state could
// wait out its whole wait. After a resume (the agent answers again after
// an outage, with its state) they ask again from index 0 too, so that no
// query waits on an index the agent will not reach, but compare the
// answer with the index they saw last: an index that went backwards is a
// reset.
type queryMarks struct{ resets, resumes uint64 }

func newGeneration(parent context.Context) *generation {
	g := &generation{parent: parent}
	g.ctx, g.cancel = context.WithCancel(parent)
	return g
}

func (g *generation) current() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx
}

func (g *generation) renew() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cancel()
	g.ctx, g.cancel = context.WithCancel(g.parent)
}

// restart renews the generation after a reset and returns the number of
// resets so far.
func (g *generation) restart() uint64 {
	g.mu.Lock()
	g.marks.resets++
	n := g.marks.resets
	g.mu.Unlock()
	g.renew()
	return n
}

// resume renews the generation after an outage the agent's state
// survived.
func (g *generation) resume() {
	g.mu.Lock()
	g.marks.resumes++
	g.mu.Unlock()
	g.renew()
}

// resets is the number of resets so far: the epoch of every answer (an
// answer to a request started before the last reset is of the lost
// state).
func (g *generation) resets() uint64 { return g.seen().resets }

// seen returns the renewals so far.
func (g *generation) seen() queryMarks {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.marks
}

// pause waits d, or less when the generation is renewed meanwhile; it
// returns false when ctx ended.
func (g *generation) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.current().Done():
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}

func send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
