package consul

import "time"

// sweepRun is a re-read of every selected service of some datacenters,
// started when their catalog changed in a way the other queries cannot
// attribute, or of all datacenters to resync after a failure.
type sweepRun struct {
	start time.Time
	seq   uint64 // reads dispatched from this sequence on count
	left  map[svcKey]bool
	dcs   []int
	// found counts the services whose endpoints the sweep changed;
	// confirm marks the second sweep run when a cached one found none.
	found   int
	confirm bool
	size    int // services to read
}

// Sweeps are spaced: after a sweep that took d, the next one starts no
// earlier than dutyFactor*d later, so that however much the catalog
// churns, the source sweeps at most 1/(1+dutyFactor) of the time. Reads
// from the agent's cache (sweep_cached) reach no server, so such sweeps
// are spaced less: their cost is the agent's CPU alone.
const (
	sweepDutyFactor       = 4
	cachedSweepDutyFactor = 1
)

// maybeSweep starts a wanted sweep once the spacing allows: every
// selected service of the wanted datacenters is queued for a read.
func (l *loop) maybeSweep() {
	if len(l.sweepWanted) == 0 || l.sweep != nil || time.Now().Before(l.nextSweep) {
		return
	}
	sw := &sweepRun{start: time.Now(), seq: l.seq + 1, left: map[svcKey]bool{}, confirm: l.confirmNext}
	l.confirmNext = false
	l.sweep = sw
	for i, d := range l.dcs {
		if !l.sweepWanted[i] {
			continue
		}
		sw.dcs = append(sw.dcs, i)
		for name := range d.services {
			k := svcKey{i, name}
			if l.watched(k) {
				continue // its watch sees every change
			}
			sw.left[k] = true
			l.markSwept(k)
		}
	}
	clear(l.sweepWanted)
	sw.size = len(sw.left)
	if len(sw.left) == 0 {
		l.endSweep()
	}
}

// unwatched reports whether datacenter dc has services without a watch
// (a catalog change there may need a sweep).
func (l *loop) unwatched(dc int) bool {
	return l.w.perDC[dc] < len(l.dcs[dc].services)
}

// endSweep records a finished sweep and spaces the next. A sweep from the
// agent's cache that found nothing may have read the cache just before it
// received the change that caused the sweep (the cache follows the servers
// by milliseconds); one more sweep then confirms.
func (l *loop) endSweep() {
	sw := l.sweep
	l.sweep = nil
	factor := time.Duration(sweepDutyFactor)
	if l.s.cfg.sweepCached() {
		factor = cachedSweepDutyFactor
		if sw.found == 0 && !sw.confirm && sw.size > 0 {
			for _, dc := range sw.dcs {
				l.sweepWanted[dc] = true
			}
			l.confirmNext = true
		}
	}
	l.nextSweep = time.Now().Add(factor * time.Since(sw.start))
}
