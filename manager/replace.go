package manager

import (
	"reflect"
	"time"
)

// A changed source is replaced make-before-break. A reload that changes
// any key of a source's entry must not take the source's services from the
// clients while the new instance connects, reads its registry (which may
// be down at that very moment) and syncs: the clients would lose them for
// that long, or for as long as the registry stays down. So the new
// instance starts beside the previous one, and until the new one sends its
// first update the previous one keeps running and everything it reports
// is served, through the source's guard as before. The new instance's
// first update is then applied like any update of the source (its
// differences published, its removals judged by the guard), and the
// previous instance stops.
//
// The new instance has its startup timeout, counted from the reload, to
// get there. When it ends first, the previous instance stops, its last
// services stay served, flagged stale (phase timed_out, the new instance's
// errors in its status), until the new instance syncs. A required source
// has no timeout: its previous instance runs until the new one syncs.
//
// Reload storms: a reload that changes the entry again while a
// replacement is in progress drops the new instance that has not synced
// (it never served anything) and starts the newest beside the same
// previous instance; one that changes it back to the configuration the
// previous instance runs (Named.Spec) drops the new instance and keeps the
// previous one, as if nothing had happened. So however many reloads come,
// at most two instances of a source run, and what clients hold is always
// the last synced instance's state.

// replacement is a changed source's switch-over in progress.
type replacement struct {
	prev  *slot     // the previous instance, running
	until time.Time // the end of the new instance's startup timeout; zero: none
	// What the position had under the previous instance, restored when a
	// reload goes back to its configuration.
	clean sanitizer
	rules Guard
	phase string
}

// replace starts n's new instance at position j in place of old, the
// instance in force, at now, and returns the new instance's slot. The
// intake has already moved the position's state to j.
func (m *Manager) replace(in *intake, j int, old *slot, now time.Time) *slot {
	n := m.opts.Sources[j]
	log := m.log.With("source", n.Name)
	rep := in.replacing[j]
	switch {
	case rep != nil:
		// The new instance that has not synced yet never served anything.
		log.Info("source changed again before its new instance synced; starting the newest beside the previous instance, which still serves")
		old.stop()
		rep.prev.idx = j
	case in.phases[j] == PhaseSynced || in.phases[j] == PhaseWarm:
		log.Info("source changed; starting its new instance beside the previous one, which serves until the new one has synced",
			"startup_timeout", n.Startup.Timeout)
		old.prev, old.idx = true, j
		rep = &replacement{prev: old, clean: in.clean[j], rules: in.guards[j].rules, phase: in.phases[j]}
		in.replacing[j] = rep
		in.setPhase(j, PhaseReplacing)
	default:
		// Nothing of the old instance is served but what the position
		// already holds, which stays until the new instance syncs.
		log.Info("source changed before it synced; restarting it")
		old.stop()
	}
	if rep != nil {
		rep.until = time.Time{}
		if t := n.Startup.Timeout; t > 0 && !n.Startup.Required {
			rep.until = now.Add(t)
		}
	}
	in.clean[j] = sanitizer{status: n.Status}
	in.guards[j].rules = n.Guard
	in.since[j] = now
	return m.startSource(j, n)
}

// reverts reports whether n, a changed entry for the source at i, goes
// back to the configuration that the previous instance of a replacement
// in progress runs.
func (in *intake) reverts(i int, n Named) bool {
	rep := in.replacing[i]
	return rep != nil && n.Spec != nil && reflect.DeepEqual(n.Spec, rep.prev.named.Spec)
}

// revert ends the replacement at j by keeping its previous instance and
// stopping pending, the new instance, and returns the previous instance's
// slot.
func (in *intake) revert(j int, pending *slot) *slot {
	rep := in.replacing[j]
	in.m.log.Info("source changed back to the configuration in force; its previous instance stays and the new one stops",
		"source", rep.prev.named.Name)
	pending.stop()
	in.replacing[j] = nil
	in.clean[j], in.guards[j].rules = rep.clean, rep.rules
	in.setPhase(j, rep.phase)
	rep.prev.prev, rep.prev.idx = false, j
	return rep.prev
}

// promote ends the replacement at i because its new instance sent its
// first update: the previous instance stops.
func (in *intake) promote(i int) {
	rep := in.replacing[i]
	in.replacing[i] = nil
	rep.prev.stop()
}

// expire stops, at now, the previous instances of the replacements whose
// new instance's startup timeout ended; their last services stay served.
func (in *intake) expire(now time.Time) {
	for i, rep := range in.replacing {
		if rep == nil || rep.until.IsZero() || now.Before(rep.until) {
			continue
		}
		n := in.m.opts.Sources[i]
		in.m.log.Warn("the changed source's new instance did not sync within its startup timeout; "+
			"stopping the previous instance and serving its last services, stale, until the new one syncs",
			"source", n.Name, "timeout", n.Startup.Timeout, "err", n.lastError())
		in.promote(i)
		in.setPhase(i, PhaseTimedOut)
	}
}

// follow keeps the previous instance of a replacement at i, whose source
// was kept by a reconfiguration, at its new index.
func (in *intake) follow(i int) {
	if rep := in.replacing[i]; rep != nil {
		rep.prev.idx = i
	}
}

// stopAll stops sl, a source being removed, and the previous instance of
// its replacement if one is in progress.
func (in *intake) stopAll(sl *slot) {
	if rep := in.replacing[sl.idx]; rep != nil {
		rep.prev.stop()
	}
	sl.stop()
}

// lastError returns the last error the source's status records, if any.
func (n Named) lastError() string {
	if n.Status == nil {
		return ""
	}
	return n.Status.Snapshot().LastError
}
