package sources

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The removal guard stands between a source and the merged state. A change
// that would remove more than Guard.MaxRemovedFraction of the source's
// services, or of one service's endpoints, is what an emptied or
// half-restarted registry looks like (a Consul agent restarted without its
// state reports nothing, then its services as they re-register), so its
// removals are held: while a hold is on, the source's additions and changes
// flow as usual, but everything it stopped reporting stays served.
//
// The hold ends Guard.Hold after the source last brought back something it
// had dropped (a registry refilling keeps it on, however long it takes; a
// source deliberately emptied brings nothing back, so it empties after one
// Hold), at most maxHoldFactor times Hold after it began, at once when the
// source reports everything again, or when an operator confirms it
// (Manager.ConfirmRemovals). The source's state as it reports it then is
// applied in full.

// maxHoldFactor bounds a hold that the source keeps extending (an instance
// flapping in and out) to this many times Guard.Hold.
const maxHoldFactor = 10

// epKey identifies an endpoint within a service.
type epKey struct {
	addr string
	port uint32
}

// sourceGuard is the guard of one source, and the record of what the
// merged state holds for it (eff). The manager's loop owns it.
type sourceGuard struct {
	policy Guard
	eff    map[string]Service
	hold   *heldChange
	status *Status
}

// heldChange is a hold in progress.
type heldChange struct {
	base map[string]Service // eff when the hold began
	rep  map[string]Service // what the source reports now
	// held counts, per name, what base has and rep lacks: -1 for a whole
	// service, else the number of endpoints.
	held                   map[string]int
	services, endpoints    int
	since, restored, until time.Time
	reason                 string
}

func newGuard(p Guard, st *Status) *sourceGuard {
	return &sourceGuard{policy: p, eff: map[string]Service{}, status: st}
}

// receive turns update u of the source into the update the merger applies:
// u itself unless a hold is on or u starts one.
func (g *sourceGuard) receive(u Update, now time.Time) (out Update, started string) {
	if g.hold == nil {
		if !g.policy.enabled() {
			applyUpdate(g.eff, u)
			return u, ""
		}
		if started = g.suspicious(u); started == "" {
			applyUpdate(g.eff, u)
			return u, ""
		}
		g.hold = &heldChange{base: g.eff, rep: maps.Clone(g.eff), held: map[string]int{},
			since: now, restored: now, reason: started}
		g.eff = maps.Clone(g.eff)
	}
	h := g.hold
	before := h.services + h.endpoints
	for _, name := range applyUpdate(h.rep, u) {
		g.resolve(name, &out)
	}
	if h.services+h.endpoints < before {
		h.restored = now
	}
	h.until = h.restored.Add(g.policy.Hold)
	if limit := h.since.Add(maxHoldFactor * g.policy.Hold); limit.Before(h.until) {
		h.until = limit
	}
	if h.services+h.endpoints == 0 {
		// Everything came back: nothing is left to remove.
		g.eff, g.hold = h.rep, nil
	}
	g.publishStatus()
	return out, started
}

// suspicious returns why u removes too much, or "".
func (g *sourceGuard) suspicious(u Update) string {
	f := g.policy.MaxRemovedFraction
	removed := 0
	if u.Full {
		keep := make(map[string]bool, len(u.Services))
		for _, s := range u.Services {
			keep[s.Name] = true
		}
		for name := range g.eff {
			if !keep[name] {
				removed++
			}
		}
	} else {
		for _, name := range u.Removed {
			if _, ok := g.eff[name]; ok {
				removed++
			}
		}
	}
	if len(g.eff) > 0 && float64(removed) > f*float64(len(g.eff)) {
		return fmt.Sprintf("%d of %d services removed", removed, len(g.eff))
	}
	for _, s := range u.Services {
		old, ok := g.eff[s.Name]
		if !ok || len(old.Endpoints) == 0 {
			continue
		}
		if lost := len(missing(old, s)); float64(lost) > f*float64(len(old.Endpoints)) {
			return fmt.Sprintf("service %s: %d of %d endpoints removed", s.Name, lost, len(old.Endpoints))
		}
	}
	return ""
}

// resolve recomputes what is served for name during a hold: what the
// source reports plus what it dropped since the hold began, and appends
// the difference from eff to out.
func (g *sourceGuard) resolve(name string, out *Update) {
	h := g.hold
	b, inBase := h.base[name]
	r, inRep := h.rep[name]
	held := 0
	var want Service
	switch {
	case inBase && inRep:
		lost := missing(b, r)
		held, want = len(lost), r
		if len(lost) > 0 {
			want = Service{Name: name, Endpoints: append(slices.Clone(r.Endpoints), lost...)}
			want.Sort()
		}
	case inBase:
		held, want = -1, b
	case inRep:
		want = r
	}
	g.count(name, held)
	cur, had := g.eff[name]
	switch {
	case inBase || inRep:
		if !had || !cur.Equal(want) {
			g.eff[name] = want
			out.Services = append(out.Services, want)
		}
	case had:
		delete(g.eff, name)
		out.Removed = append(out.Removed, name)
	}
}

// count records that name now holds back n (see heldChange.held).
func (g *sourceGuard) count(name string, n int) {
	h := g.hold
	switch old := h.held[name]; {
	case old < 0:
		h.services--
	default:
		h.endpoints -= old
	}
	switch {
	case n < 0:
		h.services++
	default:
		h.endpoints += n
	}
	if n == 0 {
		delete(h.held, name)
	} else {
		h.held[name] = n
	}
}

// deadline returns when the hold ends, or the zero time without one.
func (g *sourceGuard) deadline() time.Time {
	if g.hold == nil {
		return time.Time{}
	}
	return g.hold.until
}

// release ends the hold and returns the update that applies what the
// source reports, with the number of services and endpoints it removes.
func (g *sourceGuard) release() (out Update, services, endpoints int) {
	h := g.hold
	out = Update{Full: true, Services: slices.Collect(maps.Values(h.rep))}
	g.eff, g.hold = h.rep, nil
	g.publishStatus()
	return out, h.services, h.endpoints
}

func (g *sourceGuard) publishStatus() {
	if g.status == nil {
		return
	}
	var gs *GuardSnapshot
	if h := g.hold; h != nil {
		gs = &GuardSnapshot{Since: h.since, Until: h.until, Reason: h.reason,
			HeldServices: h.services, HeldEndpoints: h.endpoints}
	}
	g.status.setGuard(gs)
}

// missing returns the endpoints of old whose address and port are absent
// from cur.
func missing(old, cur Service) []Endpoint {
	have := make(map[epKey]bool, len(cur.Endpoints))
	for _, e := range cur.Endpoints {
		have[epKey{e.Address, e.Port}] = true
	}
	var lost []Endpoint
	for _, e := range old.Endpoints {
		if !have[epKey{e.Address, e.Port}] {
			lost = append(lost, e)
		}
	}
	return lost
}

// applyUpdate applies u to state (a source's services by name) as the
// Update contract says, and returns the names it may have changed.
func applyUpdate(state map[string]Service, u Update) (touched []string) {
	if u.Full {
		keep := make(map[string]bool, len(u.Services))
		for _, s := range u.Services {
			keep[s.Name] = true
		}
		for name := range state {
			if !keep[name] {
				delete(state, name)
				touched = append(touched, name)
			}
		}
	}
	for _, name := range u.Removed {
		if _, ok := state[name]; ok && !u.Full {
			delete(state, name)
			touched = append(touched, name)
		}
	}
	for _, s := range u.Services {
		state[s.Name] = s
		touched = append(touched, s.Name)
	}
	return touched
}

// confirmation asks the loop to end a source's hold at once.
type confirmation struct {
	source string
	reply  chan error
}

// ConfirmRemovals ends the removal hold of the named source at once: what
// the source reports now is applied. It fails when the manager is not
// running, no source has that name, or no hold is on.
func (m *Manager) ConfirmRemovals(ctx context.Context, source string) error {
	c := confirmation{source: source, reply: make(chan error, 1)}
	select {
	case m.confirms <- c:
	case <-ctx.Done():
		return fmt.Errorf("confirming the removals of %q: %w", source, ctx.Err())
	}
	return <-c.reply
}

// confirm runs on the loop: it releases the hold of source, merging what
// the source reports.
func (m *Manager) confirm(pol *policy, st *merger, source string) error {
	for i, n := range m.opts.Sources {
		if n.Name != source {
			continue
		}
		if pol.guards[i].hold == nil {
			return fmt.Errorf("source %q holds no removals", source)
		}
		m.log.Info("removals confirmed by an operator", "source", source)
		st.apply(i, pol.release(i))
		return nil
	}
	return fmt.Errorf("no source named %q", source)
}
