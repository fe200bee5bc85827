package consul

import (
	"sync/atomic"
	"time"
)

// sweeper follows the services without a watch where the bulk queries
// cannot attribute a change to one: it takes in the censuses of the
// catalog (census.go), and sweeps when censuses cannot list the instances
// (or ACLs filtered them). A sweep looks at every unwatched service of
// the datacenters whose catalog moved, in the same order every time: the
// read queue peeks at each (its index only) and reads in full those whose
// index moved, paced by the sweep pacer (pacer.go).
type sweeper struct {
	cat   catalog
	reads *readQueue
	cfg   *Config
	cov   *coverage
	// flags, per datacenter: it has services without a watch, so its
	// catalog query takes censuses (shared with the pollers).
	flags    []atomic.Bool
	censuses []censusState
	lastDump *census // the last census that was a dump; nil before the first
	// wanted: the datacenters to sweep; run: the running sweep; next: no
	// sweep starts before it; confirmNext: the next sweep confirms a
	// cached one that found nothing (end).
	wanted      map[int]bool
	run         *sweepRun
	next        time.Time
	confirmNext bool
	// lastSize and lastTook: how many services the last sweep looked
	// at, and how long it took.
	lastSize int
	lastTook time.Duration
}

func newSweeper(cat catalog, reads *readQueue, cfg *Config, cov *coverage, flags []atomic.Bool) *sweeper {
	return &sweeper{cat: cat, reads: reads, cfg: cfg, cov: cov, flags: flags,
		censuses: make([]censusState, len(cat)), wanted: map[int]bool{}}
}

// sweepRun is a look at every unwatched service of some datacenters,
// started when their catalog changed in a way the other queries cannot
// attribute.
type sweepRun struct {
	start time.Time
	dcs   []int
	batch *sweepBatch
	// confirm marks the second sweep run when a cached one found none.
	confirm bool
	size    int // services to look at
}

// uncachedSweepSpacing: a sweep that reaches the servers (sweep_cached:
// false) is followed by a pause of this many times its duration, so that
// however much the catalog churns, the servers see sweeps at most a fifth
// of the time. Cached sweeps cost the agent alone, and the pacer bounds
// that; they follow each other as long as the catalog moves.
const uncachedSweepSpacing = 4

// catalogMoved notes an answer of datacenter dc's catalog query: while dc
// has services without a watch, a catalog that moved (not its first
// answer) may hide a change no bulk query attributes, so a sweep is
// wanted unless censuses dump every instance, and the catalog query takes
// censuses.
func (s *sweeper) catalogMoved(dc int, first bool) {
	unwatched := s.cat.unwatched(dc)
	if !first && unwatched && !s.censuses[dc].dumped {
		s.wanted[dc] = true
	}
	s.flags[dc].Store(unwatched)
}

// wantUnwatched asks for a sweep of every datacenter with services without
// a watch: what they may have missed is not known (the agent was away).
func (s *sweeper) wantUnwatched() {
	for dc := range s.cat {
		if s.cat.unwatched(dc) {
			s.wanted[dc] = true
		}
	}
}

// join has a service added while a sweep runs looked at by it.
func (s *sweeper) join(st *svcState) {
	if s.run != nil {
		st.sweep = s.run.batch
		s.run.batch.left++
	}
}

// maybe ends the running sweep once it has looked at every service, and
// starts a wanted sweep once the spacing allows: every unwatched service
// of the wanted datacenters is queued for a sweep read.
func (s *sweeper) maybe() {
	if s.run != nil && s.run.batch.left == 0 {
		s.end()
	}
	if len(s.wanted) == 0 || s.run != nil || time.Now().Before(s.next) {
		return
	}
	sw := &sweepRun{start: time.Now(), batch: s.reads.startBatch(), confirm: s.confirmNext}
	s.confirmNext = false
	s.run = sw
	for dc, d := range s.cat {
		if !s.wanted[dc] {
			continue
		}
		sw.dcs = append(sw.dcs, dc)
		// In the same order every time, so that a service is looked at
		// again one sweep after the last time, not up to two.
		for _, st := range sortedServices(d) {
			if st.watch != nil {
				continue // its watch sees every change
			}
			st.sweep = sw.batch
			sw.batch.left++
			s.reads.markSwept(st)
		}
	}
	clear(s.wanted)
	sw.size = sw.batch.left
	if sw.batch.left == 0 {
		s.end()
	}
}

// end records a finished sweep and spaces the next. A sweep from the
// agent's cache that found nothing may have read the cache just before it
// received the change that caused the sweep (the cache follows the servers
// by milliseconds); one more sweep then confirms.
func (s *sweeper) end() {
	sw := s.run
	s.run = nil
	s.reads.endBatch()
	s.lastSize, s.lastTook = sw.size, time.Since(sw.start)
	s.cov.changed()
	if !s.cfg.sweepCached() {
		s.next = time.Now().Add(uncachedSweepSpacing * time.Since(sw.start))
		return
	}
	if sw.batch.found == 0 && !sw.confirm && sw.size > 0 {
		for _, dc := range sw.dcs {
			s.wanted[dc] = true
		}
		s.confirmNext = true
	}
}

// wake is when a wanted sweep may start, or the zero time.
func (s *sweeper) wake() time.Time {
	if len(s.wanted) == 0 || s.run != nil {
		return time.Time{}
	}
	return s.next
}

// censusState is what the sweeper keeps of the censuses of one
// datacenter.
type censusState struct {
	// seen: what the last census saw, nil before the first or after a
	// failure; dump: it was a dump; dumped: a dump that ACLs did not
	// filter, so sweeps are not needed.
	seen         map[censusKey]censusEntry
	dump, dumped bool
}

// onCensus applies a census: a service with an instance or check that
// appeared, vanished or changed since the previous census is read, unless
// it is watched. A failed census, or one of another kind than the
// previous, only starts over: the next one is compared with it.
func (s *sweeper) onCensus(dc int, cen *census) {
	cs := &s.censuses[dc]
	if cen.err != nil {
		cs.seen, cs.dumped = nil, false
		return
	}
	prev := cs.seen
	cs.seen, cs.dumped = cen.seen, cen.dump && !cen.filtered
	if cs.dumped {
		s.lastDump = cen
		s.cov.changed()
	}
	if prev == nil || cs.dump != cen.dump {
		cs.dump = cen.dump
		return
	}
	changed := map[string]bool{}
	for k, e := range cen.seen {
		if old, ok := prev[k]; !ok || old != e {
			changed[e.service] = true
		}
	}
	for k, e := range prev {
		if _, ok := cen.seen[k]; !ok {
			changed[e.service] = true
		}
	}
	for name := range changed {
		if st := s.cat.find(svcKey{dc, name}); st != nil {
			s.reads.markSignal(st)
		}
	}
}

// facts tells the status how the services without a watch are followed.
func (s *sweeper) facts() followFacts {
	f := followFacts{dumping: s.dumping(), swept: s.lastSize, sweepTook: s.lastTook}
	if f.dumping {
		f.every, f.took = s.lastDump.every, s.lastDump.took
	}
	return f
}

// dumping reports whether the last census of every datacenter with
// unwatched services was a dump that ACLs did not filter (no sweeps run).
func (s *sweeper) dumping() bool {
	if s.lastDump == nil {
		return false
	}
	for dc := range s.cat {
		if !s.censuses[dc].dumped && s.cat.unwatched(dc) {
			return false
		}
	}
	return true
}
