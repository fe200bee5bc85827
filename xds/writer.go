package xds

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// startWriter attaches a writer to the client and pokes it once, for
// whatever the client was owed before it had one.
func (c *client) startWriter(ctx context.Context, cancel context.CancelFunc, send func(*outbound) error) *writer {
	w := &writer{c: c, ctx: ctx, cancel: cancel, send: send}
	w.idle.L = &w.mu
	w.timer = time.AfterFunc(time.Hour, w.poke)
	w.timer.Stop()
	c.writer.Store(w)
	w.poke()
	return w
}

// poke makes sure a run looks at the client after this call.
func (w *writer) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopped:
	case w.running:
		w.again = true
	default:
		w.running = true
		go w.run()
	}
}

// run sends until nothing is owed and no poke came meanwhile.
func (w *writer) run() {
	for {
		due, err := w.drain()
		if w.afterDrain != nil {
			w.afterDrain()
		}
		w.mu.Lock()
		if err != nil || w.ctx.Err() != nil {
			w.err = err
			w.stopped = true
		}
		if w.again && !w.stopped {
			w.again = false
			w.mu.Unlock()
			continue
		}
		w.running = false
		if !w.stopped && !due.IsZero() {
			w.timer.Reset(time.Until(due))
		}
		w.idle.Broadcast()
		w.mu.Unlock()
		if err != nil {
			w.cancel()
		}
		return
	}
}

// drain sends what the client is owed; it returns the earliest
// unknown-name deadline when nothing is left. A large response first waits
// for its share of the send budget, which the transport returns once it
// has written the response (see budget).
func (w *writer) drain() (time.Time, error) {
	c := w.c
	for {
		c.mu.Lock()
		o, due := c.next(time.Now())
		c.mu.Unlock()
		if o == nil {
			// The slots whose last removal this run sent are released
			// now rather than at the next Apply, which may be long in
			// coming after a shrink.
			c.s.orphans.reap(&c.s.mu)
			return due, nil
		}
		tr := o.msg.SendState()
		if o.bytes >= wire.SmallResponse {
			g, err := c.s.sendBudget.Reserve(w.ctx, o.msg)
			if err != nil {
				return time.Time{}, nil // the stream ended while waiting
			}
			tr.Grant = g
			w.grants = append(slices.DeleteFunc(w.grants, func(g *wire.Grant) bool { return g.Done.Load() }), g)
		}
		err := w.send(o)
		if !tr.Encoded.Load() {
			tr.Grant.Release() // another codec marshalled a copy: nothing shared in flight
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("sending %s: %w", o.t.url, err)
		}
		o.t.m.sent(o)
	}
}

// stop ends the writer once the stream's context is done: it waits for a
// running send, returns the budget the stream still holds and reports the
// send that failed, if one did.
func (w *writer) stop() error {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	for w.running {
		w.idle.Wait()
	}
	grants := w.grants
	w.grants = nil
	err := w.err
	w.mu.Unlock()
	for _, g := range grants {
		g.Release()
	}
	return err
}

// poke tells the client's writer to look again; a client without one (not
// yet attached, or driven in process) ignores it.
func (c *client) poke() {
	if w := c.writer.Load(); w != nil {
		w.poke()
	}
}
