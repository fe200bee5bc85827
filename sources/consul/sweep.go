package consul

import "time"

// sweepRun is a re-read of every selected service of some datacenters,
// started when their catalog changed in a way the other queries cannot
// attribute, or of all datacenters to resync after a failure.
type sweepRun struct {
	start time.Time
	seq   uint64 // reads dispatched from this sequence on count
	left  map[svcKey]bool
}

// sweepDutyFactor spaces sweeps: after a sweep that took d, the next one
// starts no earlier than sweepDutyFactor*d later, so that however much the
// catalog churns, the source sweeps at most 1/(1+sweepDutyFactor) of the
// time.
const sweepDutyFactor = 4

// maybeSweep starts a wanted sweep once the spacing allows: every
// selected service of the wanted datacenters is queued for a read.
func (l *loop) maybeSweep() {
	if len(l.sweepWanted) == 0 || l.sweep != nil || time.Now().Before(l.nextSweep) {
		return
	}
	sw := &sweepRun{start: time.Now(), seq: l.seq + 1, left: map[svcKey]bool{}}
	l.sweep = sw
	for i, d := range l.dcs {
		if !l.sweepWanted[i] {
			continue
		}
		for name := range d.services {
			k := svcKey{i, name}
			sw.left[k] = true
			l.markSwept(k)
		}
	}
	clear(l.sweepWanted)
	if len(sw.left) == 0 {
		l.endSweep()
	}
}

// endSweep records a finished sweep and spaces the next.
func (l *loop) endSweep() {
	sw := l.sweep
	l.sweep = nil
	l.nextSweep = time.Now().Add(sweepDutyFactor * time.Since(sw.start))
}
