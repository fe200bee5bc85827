package manager

import (
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The readiness gate. The first publish waits until every source is
// accounted for: synced; or optional and serving its persisted services
// (warm start); or optional and past its startup timeout (served as
// empty). A required source keeps the gate closed until it really synced.
// And the gate never opens on timeouts alone: at least one source must
// have synced or be warm, so that one slow source cannot make the first
// publish an empty world.

// warmWait is how long a source with persisted state has to sync before
// that state is served instead: short, so that a bridge restarted during a
// registry outage serves within a second, and long enough that a healthy
// registry usually answers first and nothing stale is served at all.
const warmWait = 300 * time.Millisecond

// policy is what the manager's loop keeps besides the merged state: each
// source's startup phase and removal guard, the persisted state, and when
// something of this is due next. The loop owns it.
type policy struct {
	m       *Manager
	start   time.Time
	phases  []string
	guards  []*sourceGuard
	clean   []sanitizer
	loaded  map[string][]sources.Service // persisted state, by source name
	warmed  bool                         // warmWait passed
	open    bool                         // the gate opened
	saveDue time.Time                    // a save is pending, not before then
	lastSav time.Time
	timer   *time.Timer
	changes *changeLog
}

func newPolicy(m *Manager, now time.Time) *policy {
	p := &policy{m: m, start: now, timer: time.NewTimer(time.Hour), changes: newChangeLog(m.log)}
	for _, n := range m.opts.Sources {
		p.phases = append(p.phases, PhaseWaiting)
		p.guards = append(p.guards, newGuard(n.Guard, n.view))
		p.clean = append(p.clean, sanitizer{status: n.Status})
		p.setPhase(len(p.phases)-1, PhaseWaiting)
	}
	if m.opts.Store != nil {
		p.loaded = m.opts.Store.Load()
	}
	p.rearm(now)
	return p
}

func (p *policy) setPhase(i int, phase string) {
	p.phases[i] = phase
	if v := p.m.opts.Sources[i].view; v != nil {
		v.setStartup(phase)
	}
}

// receive passes update u of source i through its guard and records the
// source as synced.
func (p *policy) receive(i int, u sources.Update, now time.Time) sources.Update {
	n := p.m.opts.Sources[i]
	if p.phases[i] != PhaseSynced {
		if !u.Full {
			p.m.log.Warn("first update of a source is not full; treating it as its complete state", "source", n.Name)
			u.Full = true
		}
		p.m.log.Info("source synced", "source", n.Name, "services", len(u.Services), "was", p.phases[i])
		p.setPhase(i, PhaseSynced)
	}
	if dropped := p.clean[i].clean(&u); dropped > 0 {
		p.m.log.Warn("dropped endpoints that cannot be served", "source", n.Name, "dropped", dropped)
	}
	for k := range u.Services {
		u.Services[k].Sort()
	}
	out, ev := p.guards[i].receive(u, now)
	p.logHold(i, ev)
	return out
}

// logHold logs the start (WARN) or the end (INFO) of a hold of source i.
func (p *policy) logHold(i int, ev holdEvent) {
	n := p.m.opts.Sources[i]
	if ev.reason != "" {
		p.m.log.Warn("holding the removals of a source that looks broken or restarting; they apply once it has brought nothing back for the hold, or at once when confirmed",
			"source", n.Name, "reason", ev.reason, "held_services", ev.services, "held_endpoints", ev.endpoints,
			"hold", n.Guard.Hold, "held_until", ev.until, "longest", maxHoldFactor*n.Guard.Hold,
			"confirm", "POST /guard/confirm?source="+n.Name+" on the admin listener")
	}
	if ev.why != "" {
		p.m.log.Info("removal hold over; applying what the source reports", "source", n.Name, "why", ev.why,
			"removed_services", ev.services, "removed_endpoints", ev.endpoints)
	}
}

// due applies what is due at now (warm state, startup timeouts, ends of
// holds) and returns the updates to merge, by source.
func (p *policy) due(now time.Time) map[int]sources.Update {
	out := map[int]sources.Update{}
	for i, n := range p.m.opts.Sources {
		if p.phases[i] != PhaseWaiting || n.Startup.Required {
			continue
		}
		if svcs, ok := p.loaded[n.Name]; ok && !p.warmed && !now.Before(p.start.Add(warmWait)) {
			p.m.log.Warn("source not synced yet; serving its persisted services, stale", "source", n.Name, "services", len(svcs))
			out[i], _ = p.guards[i].receive(sources.Update{Full: true, Services: svcs}, now)
			p.setPhase(i, PhaseWarm)
		} else if t := n.Startup.Timeout; t > 0 && !now.Before(p.start.Add(t)) {
			p.m.log.Warn("source not synced within its startup timeout; serving it as empty until it syncs", "source", n.Name, "timeout", t)
			p.setPhase(i, PhaseTimedOut)
		}
	}
	if !now.Before(p.start.Add(warmWait)) {
		p.warmed = true
	}
	for i, g := range p.guards {
		if d := g.deadline(); !d.IsZero() && !now.Before(d) {
			out[i] = p.release(i, g.timeout())
		}
	}
	if !p.saveDue.IsZero() && !now.Before(p.saveDue) {
		p.save(now)
	}
	return out
}

// release ends the hold of source i, for the reason why.
func (p *policy) release(i int, why string) sources.Update {
	u, ev := p.guards[i].release(why)
	p.logHold(i, ev)
	return u
}

// gate reports whether the first publish may happen.
func (p *policy) gate() bool {
	if p.open || len(p.phases) == 0 {
		return true
	}
	serving := false
	for i, ph := range p.phases {
		switch {
		case ph == PhaseSynced || ph == PhaseWarm:
			serving = true
		case ph == PhaseTimedOut && !p.m.opts.Sources[i].Startup.Required:
		default:
			return false
		}
	}
	return serving
}

// pending returns the sources the gate waits for.
func (p *policy) pending() []bool {
	out := make([]bool, len(p.phases))
	for i, ph := range p.phases {
		out[i] = ph == PhaseWaiting || ph == PhaseTimedOut
	}
	return out
}

// published notes that the merged state changed, so that it gets saved.
func (p *policy) published(now time.Time) {
	if p.m.opts.Store == nil {
		return
	}
	if p.saveDue.IsZero() {
		p.saveDue = now
		if next := p.lastSav.Add(p.m.opts.PersistInterval); next.After(now) {
			p.saveDue = next
		}
	}
}

// save hands a snapshot of the state to the saver.
func (p *policy) save(now time.Time) {
	p.m.saver.offer(p.snapshot())
	p.saveDue, p.lastSav = time.Time{}, now
}

// rearm sets the timer to the next thing due after now.
func (p *policy) rearm(now time.Time) {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for i, n := range p.m.opts.Sources {
		if p.phases[i] != PhaseWaiting || n.Startup.Required {
			continue
		}
		if _, ok := p.loaded[n.Name]; ok && !p.warmed {
			consider(p.start.Add(warmWait))
		}
		if n.Startup.Timeout > 0 {
			consider(p.start.Add(n.Startup.Timeout))
		}
	}
	for _, g := range p.guards {
		consider(g.deadline())
	}
	consider(p.saveDue)
	consider(p.changes.next())
	p.timer.Stop()
	if !next.IsZero() {
		p.timer.Reset(max(next.Sub(now), 0))
	}
}

// reporting wraps publish so that the receiver can say which services it
// could not serve (Changes.Failed): the error is recorded in the status of
// every source that reports the service, until a new version of it is
// published or it is removed.
func (p *policy) reporting(publish func(Changes)) func(Changes) {
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
		for _, n := range p.m.opts.Sources {
			if n.view != nil {
				n.view.forgetServices(names)
			}
		}
		c.Failed = func(service string, err error) {
			for i, g := range p.guards {
				if _, ok := g.eff[service]; ok && p.m.opts.Sources[i].view != nil {
					p.m.opts.Sources[i].view.serviceFailed(service, err)
				}
			}
		}
		publish(c)
	}
}
