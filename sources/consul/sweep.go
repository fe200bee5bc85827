package consul

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"
)

// Sweeps. A change that no bulk query attributes (an instance added or
// removed without checks, a port changed) on a service without a watch is
// found by sweeping: when the catalog's index moved, every unwatched
// service of that datacenter is looked at again. A sweep asks only for
// each service's index (a peek: the service's health query with a filter
// that matches no instance, so the answer is "[]" and its X-Consul-Index),
// from the agent cache with sweep_cached, and reads in full, at change
// priority, the services whose index moved. A peek costs the agent a
// fraction of a full read (no instances to encode), and most of a sweep is
// peeks: it reads what changed, not everything it looked at.
//
// The agent's time is the budget: sweep reads (peeks, and full reads of
// services whose index is unknown) run at most sweepSlots at a time, and
// the pacer spaces them so that what they cost the agent adds up to at
// most sweepShare of the time. A read's cost is taken as costFactor times
// the shortest round trip among the recent reads of its kind: on loopback
// a round trip is the agent's work plus the transport's, and the shortest
// of many is one that did not wait for a CPU, so this follows how fast the
// agent is without mistaking a busy host's scheduling delays for the
// agent's work (which would slow sweeps to a crawl exactly when the host
// is busy for other reasons). The factor accounts for what a request
// costs the agent outside its round trip: collecting the garbage it
// allocated, on other threads, and its connection's reads and wakeups
// (docs/benchmarks.md has the agent's CPU measured against this charge).
// Over a network the round trip also holds the network's latency, and
// sweeps are slower.

// sweepShare is the share of the time sweep reads may keep the agent busy;
// sweepSlots how many run at once (two: one per core of a small host,
// without queueing in the agent that would inflate their round trips).
const (
	sweepShare = 0.2
	sweepSlots = 2
)

// costFactor: a sweep read is charged this many times its shortest recent
// round trip (see the Sweeps comment).
const costFactor = 2

// pacerCredit bounds the credit a quiet pacer builds up, so that a sweep
// after an idle period starts with a short burst, not a long one.
const pacerCredit = 10 * time.Millisecond

// costWindow is how many recent round trips of each kind of sweep read
// the pacer takes the shortest of.
const costWindow = 64

// pacer accounts the cost of sweep reads against sweepShare of the wall
// clock.
type pacer struct {
	debt time.Duration // cost not yet covered by elapsed time
	at   time.Time     // when debt was last settled
	// recent holds the latest round trips of full reads (0) and peeks
	// (1), a ring each.
	recent [2][costWindow]time.Duration
	next   [2]int
}

func (p *pacer) settle(now time.Time) {
	if !p.at.IsZero() {
		p.debt -= time.Duration(float64(now.Sub(p.at)) * sweepShare)
	}
	p.at = now
	p.debt = max(p.debt, -pacerCredit)
}

// spend records a sweep read's round trip and charges its cost.
func (p *pacer) spend(peek bool, took time.Duration, now time.Time) {
	kind := 0
	if peek {
		kind = 1
	}
	p.recent[kind][p.next[kind]] = took
	p.next[kind] = (p.next[kind] + 1) % costWindow
	cost := took
	for _, d := range p.recent[kind] {
		if d > 0 && d < cost {
			cost = d
		}
	}
	p.settle(now)
	p.debt += costFactor * cost
}

// readyAt is when the next sweep read may start.
func (p *pacer) readyAt(now time.Time) time.Time {
	p.settle(now)
	if p.debt <= 0 {
		return now
	}
	return now.Add(time.Duration(float64(p.debt) / sweepShare))
}

// sweepReady reports whether a sweep read may start now.
func (l *loop) sweepReady(now time.Time) bool {
	return l.sweeping < sweepSlots && !l.pacer.readyAt(now).After(now)
}

// sweepWake is when the loop must wake to start a paced sweep read, or the
// zero time.
func (l *loop) sweepWake() time.Time {
	if len(l.queue[prioSweep]) == 0 || l.sweeping >= sweepSlots {
		return time.Time{}
	}
	return l.pacer.readyAt(time.Now())
}

// peekFilter matches no instance: Consul gives every instance an ID (the
// service name when the registration has none).
const peekFilter = `Service.ID == ""`

// peek asks for the index of one service's health (see Sweeps).
func (s *Source) peek(ctx context.Context, c *api.Client, dc, service string, cached bool) (*api.QueryMeta, error) {
	var meta *api.QueryMeta
	err := s.request(ctx, false, func(rctx context.Context) error {
		q := s.queryOptions(rctx, dc)
		q.UseCache, q.Filter = cached, peekFilter
		var err error
		_, meta, err = c.Health().ServiceMultipleTags(service, s.cfg.Tags, false, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("peeking at the index of service %q in %s: %w", service, dc, err)
	}
	return meta, nil
}

// onPeek applies a peek: a service whose index moved since the last peek
// (or, on the first, since the read applied last) is read in full.
func (l *loop) onPeek(r fetchResult, st *svcState) {
	was := st.peekIndex
	if was == 0 {
		was = st.index
	}
	st.peekIndex = r.index
	if r.index != was {
		if sw := l.sweep; sw != nil {
			sw.found++
		}
		l.markDirty(st)
	}
	l.sweptOne(st, r.seq)
}

// sweepRun is a look at every unwatched service of some datacenters,
// started when their catalog changed in a way the other queries cannot
// attribute.
type sweepRun struct {
	start time.Time
	seq   uint64 // reads dispatched from this sequence on count
	// left: the services it waits for, those whose record points to it
	// (svcState.sweep); only maybeSweep, addService and leaveSweep change
	// it.
	left int
	dcs  []int
	// found counts the services whose index or endpoints the sweep found
	// changed; confirm marks the second sweep run when a cached one found
	// none.
	found   int
	confirm bool
	size    int // services to look at
}

// uncachedSweepSpacing: a sweep that reaches the servers (sweep_cached:
// false) is followed by a pause of this many times its duration, so that
// however much the catalog churns, the servers see sweeps at most a fifth
// of the time. Cached sweeps cost the agent alone, and the pacer bounds
// that; they follow each other as long as the catalog moves.
const uncachedSweepSpacing = 4

// maybeSweep starts a wanted sweep once the spacing allows: every
// unwatched service of the wanted datacenters is queued for a sweep read.
func (l *loop) maybeSweep() {
	if len(l.sweepWanted) == 0 || l.sweep != nil || time.Now().Before(l.nextSweep) {
		return
	}
	sw := &sweepRun{start: time.Now(), seq: l.seq + 1, confirm: l.confirmNext}
	l.confirmNext = false
	l.sweep = sw
	for i, d := range l.dcs {
		if !l.sweepWanted[i] {
			continue
		}
		sw.dcs = append(sw.dcs, i)
		// In the same order every time, so that a service is looked at
		// again one sweep after the last time, not up to two.
		for _, name := range slices.Sorted(maps.Keys(d.services)) {
			st := d.services[name]
			if st.watch != nil {
				continue // its watch sees every change
			}
			st.sweep = sw
			sw.left++
			l.markSwept(st)
		}
	}
	clear(l.sweepWanted)
	sw.size = sw.left
	if sw.left == 0 {
		l.endSweep()
	}
}

// leaveSweep records that the running sweep no longer waits for st (it
// was read, or removed), and ends the sweep when st was the last.
func (l *loop) leaveSweep(st *svcState) {
	sw := l.sweep
	if sw == nil || st.sweep != sw {
		return
	}
	st.sweep = nil
	if sw.left--; sw.left == 0 {
		l.endSweep()
	}
}

// unwatched reports whether datacenter dc has services without a watch
// (a catalog change there may need a sweep).
func (l *loop) unwatched(dc int) bool {
	for _, st := range l.dcs[dc].services {
		if st.watch == nil {
			return true
		}
	}
	return false
}

// endSweep records a finished sweep and spaces the next. A sweep from the
// agent's cache that found nothing may have read the cache just before it
// received the change that caused the sweep (the cache follows the servers
// by milliseconds); one more sweep then confirms.
func (l *loop) endSweep() {
	sw := l.sweep
	l.sweep = nil
	l.lastSweep = sweepRecord{size: sw.size, took: time.Since(sw.start)}
	l.noteWatches()
	if !l.s.cfg.sweepCached() {
		l.nextSweep = time.Now().Add(uncachedSweepSpacing * time.Since(sw.start))
		return
	}
	if sw.found == 0 && !sw.confirm && sw.size > 0 {
		for _, dc := range sw.dcs {
			l.sweepWanted[dc] = true
		}
		l.confirmNext = true
	}
}

// sweepRecord is what the status says of the last sweep.
type sweepRecord struct {
	size int
	took time.Duration
}
