package consul

import "time"

// sweepRun is a re-read of every selected service of some datacenters,
// started when their catalog changed in a way the other queries cannot
// attribute, or of all datacenters to resync after a failure.
type sweepRun struct {
	full  bool // every datacenter: a resync
	start time.Time
	seq   uint64 // reads dispatched from this sequence on count
	left  map[svcKey]bool
}

// sweepDutyFactor spaces sweeps: after a sweep that took d, the next one
// starts no earlier than sweepDutyFactor*d later, so that however much the
// catalog churns, the source sweeps at most 1/(1+sweepDutyFactor) of the
// time.
const sweepDutyFactor = 4

// checkRecovery starts a resync once a failing source's blocking queries
// answer again; the resync's end (endSweep) declares the recovery.
func (l *loop) checkRecovery() {
	if l.failing && l.synced && len(l.pollErr) == 0 && l.sweep == nil && len(l.sweepWanted) < len(l.dcs) {
		for i := range l.dcs {
			l.sweepWanted[i] = true
		}
		l.nextSweep = time.Time{} // a resync does not wait
	}
}

// maybeSweep starts a wanted sweep once the spacing allows: every
// selected service of the wanted datacenters is queued for a read.
func (l *loop) maybeSweep() {
	if len(l.sweepWanted) == 0 || l.sweep != nil || time.Now().Before(l.nextSweep) {
		return
	}
	sw := &sweepRun{full: len(l.sweepWanted) == len(l.dcs), start: time.Now(), seq: l.seq + 1, left: map[svcKey]bool{}}
	l.sweep = sw
	for i, d := range l.dcs {
		if !l.sweepWanted[i] {
			continue
		}
		if l.failing {
			// A resync after an outage: the cluster may have come back
			// with a fresh state and lower indexes.
			d.forgetIndexes()
		}
		for name := range d.services {
			k := svcKey{i, name}
			sw.left[k] = true
			l.markDirty(k)
		}
	}
	clear(l.sweepWanted)
	if len(sw.left) == 0 {
		l.endSweep()
	}
}

// endSweep records a finished sweep. After a failing period it declares
// the recovery if the blocking queries answer: every service was then read
// successfully since the sweep started (a failed read stays in the sweep
// until a retry succeeds), and a blocking query that failed meanwhile
// restarted from index 0, so its full answer was diffed again.
func (l *loop) endSweep() {
	sw := l.sweep
	l.sweep = nil
	took := time.Since(sw.start)
	l.nextSweep = time.Now().Add(sweepDutyFactor * took)
	if l.failing && sw.full && len(l.pollErr) == 0 {
		l.failing = false
		l.s.status.Succeeded()
		l.s.log.Info(msgRecovered, "resync", took.Round(time.Millisecond))
	}
}
