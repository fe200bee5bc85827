package manager

import (
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// intake is what stands between the sources and the merger: it takes each
// update a source sends, records the source's startup phase (startup.go),
// drops what cannot be served (sanitize.go) and passes the rest through the
// source's removal guard (guard.go). It also keeps the persisted state and
// when a save is due (statedir.go), and the timer of whatever is due next
// (warm state, a startup timeout, the end of a hold, a save, a change-log
// line). The manager's loop owns it.
//
// Its per-source slices are indexed by precedence, like the manager's
// sources; a reconfiguration moves them (reorder).
type intake struct {
	m      *Manager
	start  time.Time
	phases []string
	// since is when each source's wait for its first sync began: the
	// start, or the reconfiguration that added or changed it. Its startup
	// timeout counts from then.
	since []time.Time
	// replacing holds each changed source's replacement in progress, nil
	// for none (replace.go).
	replacing []*replacement
	guards    []*sourceGuard
	clean     []sanitizer
	loaded    map[string][]sources.Service // persisted state, by source name
	warmed    bool                         // warmWait passed
	open      bool                         // the gate opened
	saveDue   time.Time                    // a save is pending, not before then
	lastSav   time.Time
	timer     *time.Timer
	changes   *changeLog
}

func newIntake(m *Manager, now time.Time) *intake {
	in := &intake{m: m, start: now, timer: time.NewTimer(time.Hour), changes: newChangeLog(m.log)}
	for _, n := range m.opts.Sources {
		in.phases = append(in.phases, PhaseWaiting)
		in.since = append(in.since, now)
		in.replacing = append(in.replacing, nil)
		in.guards = append(in.guards, newGuard(n.Guard, n.view))
		in.clean = append(in.clean, sanitizer{status: n.Status})
		in.setPhase(len(in.phases)-1, PhaseWaiting)
	}
	if m.opts.StateDir != nil {
		in.loaded = m.stateDir.load(m.opts.StateDir, m.log)
	}
	in.rearm(now)
	return in
}

// receive passes update u of source i through its guard and records the
// source as synced. prev says that u comes from the previous instance of
// a replacement in progress, which is served as before (replace.go); the
// first update of the new instance ends the replacement.
func (in *intake) receive(i int, prev bool, u sources.Update, now time.Time) sources.Update {
	n := in.m.opts.Sources[i]
	clean := &in.clean[i]
	switch {
	case prev:
		clean = &in.replacing[i].clean
	case in.phases[i] != PhaseSynced:
		if !u.Full {
			in.m.log.Warn("first update of a source is not full; treating it as its complete state", "source", n.Name)
			u.Full = true
		}
		if in.replacing[i] != nil {
			in.promote(i)
		}
		in.m.log.Info("source synced", "source", n.Name, "services", len(u.Services), "was", in.phases[i])
		in.setPhase(i, PhaseSynced)
	}
	if dropped := clean.clean(&u); dropped > 0 {
		in.m.log.Warn("dropped endpoints that cannot be served", "source", n.Name, "dropped", dropped)
	}
	for k := range u.Services {
		u.Services[k].Sort()
	}
	out, ev := in.guards[i].receive(u, now)
	in.logHold(i, ev)
	return out
}

// logHold logs the start (WARN) or the end (INFO) of a hold of source i.
func (in *intake) logHold(i int, ev holdEvent) {
	n := in.m.opts.Sources[i]
	if ev.reason != "" {
		in.m.log.Warn("holding the removals of a source that looks broken or restarting; they apply once it has brought nothing back for the hold, or at once when confirmed",
			"source", n.Name, "reason", ev.reason, "held_services", ev.services, "held_endpoints", ev.endpoints,
			"hold", n.Guard.Hold, "held_until", ev.until, "longest", maxHoldFactor*n.Guard.Hold,
			"confirm", "POST /guard/confirm?source="+n.Name+" on the admin listener")
	}
	if ev.why != "" {
		in.m.log.Info("removal hold over; applying what the source reports", "source", n.Name, "why", ev.why,
			"removed_services", ev.services, "removed_endpoints", ev.endpoints)
	}
}

// due applies what is due at now (warm state, startup timeouts, ends of
// holds) and returns the updates to merge, by source.
func (in *intake) due(now time.Time) map[int]sources.Update {
	out := map[int]sources.Update{}
	for i, n := range in.m.opts.Sources {
		if in.phases[i] != PhaseWaiting || n.Startup.Required {
			continue
		}
		if svcs, ok := in.loaded[n.Name]; ok && !in.warmed && !now.Before(in.start.Add(warmWait)) {
			in.m.log.Warn("source not synced yet; serving its persisted services, stale", "source", n.Name, "services", len(svcs))
			out[i], _ = in.guards[i].receive(sources.Update{Full: true, Services: svcs}, now)
			in.setPhase(i, PhaseWarm)
		} else if t := n.Startup.Timeout; t > 0 && !now.Before(in.since[i].Add(t)) {
			in.m.log.Warn("source not synced within its startup timeout; serving it as empty until it syncs", "source", n.Name, "timeout", t)
			in.setPhase(i, PhaseTimedOut)
		}
	}
	if !now.Before(in.start.Add(warmWait)) {
		in.warmed = true
	}
	in.expire(now)
	for i, g := range in.guards {
		if d := g.deadline(); !d.IsZero() && !now.Before(d) {
			out[i] = in.release(i, g.timeout())
		}
	}
	if !in.saveDue.IsZero() && !now.Before(in.saveDue) {
		in.save(now)
	}
	return out
}

// release ends the hold of source i, for the reason why.
func (in *intake) release(i int, why string) sources.Update {
	u, ev := in.guards[i].release(why)
	in.logHold(i, ev)
	return u
}

// rearm sets the timer to the next thing due after now.
func (in *intake) rearm(now time.Time) {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i, n := range in.m.opts.Sources {
		if in.phases[i] != PhaseWaiting || n.Startup.Required {
			continue
		}
		if _, ok := in.loaded[n.Name]; ok && !in.warmed {
			consider(in.start.Add(warmWait))
		}
		if n.Startup.Timeout > 0 {
			consider(in.since[i].Add(n.Startup.Timeout))
		}
	}
	for _, rep := range in.replacing {
		if rep != nil {
			consider(rep.until)
		}
	}
	for _, g := range in.guards {
		consider(g.deadline())
	}
	consider(in.saveDue)
	consider(in.changes.next())
	in.timer.Stop()
	if !next.IsZero() {
		in.timer.Reset(max(next.Sub(now), 0))
	}
}

// reporting wraps publish so that the receiver can say which services it
// could not serve (Changes.Failed): the error is recorded in the status of
// every source that reports the service, until a new version of it is
// published or it is removed.
func (in *intake) reporting(publish func(Changes)) func(Changes) {
	return func(c Changes) {
		names := func(yield func(string) bool) {
			for _, s := range c.Upserted {
				if !yield(s.Name) {
					return
				}
			}
			for _, n := range c.Removed {
				if !yield(n) {
					return
				}
			}
		}
		for _, n := range in.m.opts.Sources {
			if n.view != nil {
				n.view.forgetServices(names)
			}
		}
		c.Failed = func(service string, err error) {
			for i, g := range in.guards {
				if _, ok := g.eff[service]; ok && in.m.opts.Sources[i].view != nil {
					in.m.opts.Sources[i].view.serviceFailed(service, err)
				}
			}
		}
		publish(c)
	}
}

// reorder rebuilds the per-source intake state like merger.reorder, at
// now: a kept or changed source keeps its phase, guard (a hold in progress
// goes on) and replacement in progress, a new one starts waiting with a
// fresh guard. A removed source's hold ends with it: the operator removed
// the source, which is confirmation enough.
func (in *intake) reorder(from []int, now time.Time) {
	phases, since, replacing, guards, clean := in.phases, in.since, in.replacing, in.guards, in.clean
	in.phases = make([]string, len(from))
	in.since = make([]time.Time, len(from))
	in.replacing = make([]*replacement, len(from))
	in.guards = make([]*sourceGuard, len(from))
	in.clean = make([]sanitizer, len(from))
	for j, i := range from {
		if i >= 0 {
			in.phases[j], in.since[j], in.replacing[j] = phases[i], since[i], replacing[i]
			in.guards[j], in.clean[j] = guards[i], clean[i]
			continue
		}
		n := in.m.opts.Sources[j]
		in.since[j] = now
		in.guards[j] = newGuard(n.Guard, n.view)
		in.clean[j] = sanitizer{status: n.Status}
		in.setPhase(j, PhaseWaiting)
	}
}
