package manager

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
)

// The removal guard stands between a source and the merged state. An
// update that its rules (Guard, in guardrule.go) find suspicious starts a
// hold: from then on every removal the source's updates imply is held,
// while its additions and changes flow as usual. Held means served: a
// service the source stopped reporting stays as it was when the hold
// began, and a service that lost endpoints is served with them added
// back. Full and partial updates during a hold are alike: each changes
// what the source reports, and what is served is that plus what it
// dropped since the hold began, so a service that comes back and goes
// again within the hold is held again, never removed in between.
//
// The hold ends, and the source's state as it reports it then is applied
// in full:
//   - at once when everything that was held is back;
//   - when the refill has settled: Guard.Hold after the source last
//     brought something back (a registry refilling keeps the hold on
//     however long the refill takes, a source deliberately emptied brings
//     nothing back and empties after one Hold); a Reset during a hold
//     starts a new refill and so counts as bringing something back;
//   - at most maxHoldFactor times Hold after it began;
//   - when an operator confirms it (Manager.ConfirmRemovals), or the
//     source is removed from the configuration.

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
	rules Guard
	eff   map[string]sources.Service
	peak  int // the most services eff held (reclaim.Map)
	live  int // services of eff with endpoints, while no hold is on
	hold  *heldChange
	view  *statusView
}

// heldChange is a hold in progress.
type heldChange struct {
	base map[string]sources.Service // eff when the hold began
	rep  map[string]sources.Service // what the source reports now
	// held counts, per name, what base has and rep lacks: -1 for a whole
	// service, else the number of endpoints.
	held                   map[string]int
	services, endpoints    int
	since, restored, until time.Time
	reason                 string
}

// holdEvent tells the caller of receive or release that a hold started
// (reason) or ended (why), and what it held or removed.
type holdEvent struct {
	reason, why         string
	services, endpoints int
	until               time.Time
}

func newGuard(rules Guard, v *statusView) *sourceGuard {
	return &sourceGuard{rules: rules, eff: map[string]sources.Service{}, view: v}
}

// receive turns update u of the source into the update the merger applies:
// u itself unless a hold is on or u starts one.
func (g *sourceGuard) receive(u sources.Update, now time.Time) (out sources.Update, ev holdEvent) {
	switch {
	case g.hold != nil:
		if u.Reset {
			g.hold.restored = now
		}
	case !g.rules.enabled():
		applyUpdate(g.eff, u)
		g.eff = reclaim.Map(g.eff, &g.peak)
		return u, ev
	default:
		v := g.rules.judge(g.eff, g.live, u)
		if v.reason == "" {
			applyUpdate(g.eff, u)
			g.eff = reclaim.Map(g.eff, &g.peak)
			g.live = v.live
			return u, ev
		}
		g.hold = &heldChange{base: g.eff, rep: maps.Clone(g.eff), held: map[string]int{},
			since: now, restored: now, reason: v.reason}
		g.eff = maps.Clone(g.eff)
		ev.reason = v.reason
	}
	h := g.hold
	before := h.services + h.endpoints
	for _, name := range applyUpdate(h.rep, u) {
		g.resolve(name, &out)
	}
	after := h.services + h.endpoints
	if after < before {
		h.restored = now
	}
	h.until = h.restored.Add(g.rules.Hold)
	if limit := h.since.Add(maxHoldFactor * g.rules.Hold); limit.Before(h.until) {
		h.until = limit
	}
	ev.services, ev.endpoints, ev.until = h.services, h.endpoints, h.until
	if after == 0 && before > 0 {
		// Everything came back: nothing is left to remove. (A hold that
		// a Reset started with nothing missing waits for its deadline:
		// the refill may still remove.)
		g.end()
		ev.why = "everything the source had dropped came back"
		return out, ev
	}
	g.publishStatus()
	return out, ev
}

// resolve recomputes what is served for name during a hold: what the
// source reports plus what it dropped since the hold began, and appends
// the difference from eff to out.
func (g *sourceGuard) resolve(name string, out *sources.Update) {
	h := g.hold
	b, inBase := h.base[name]
	r, inRep := h.rep[name]
	held := 0
	var want sources.Service
	switch {
	case inBase && inRep:
		lost := missing(b, r)
		held, want = len(lost), r
		if len(lost) > 0 {
			want = sources.Service{Name: name, Endpoints: append(slices.Clone(r.Endpoints), lost...)}
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
// source reports, and what that removes.
func (g *sourceGuard) release(why string) (out sources.Update, ev holdEvent) {
	h := g.hold
	out = sources.Update{Full: true, Services: slices.Collect(maps.Values(h.rep))}
	g.end()
	return out, holdEvent{why: why, services: h.services, endpoints: h.endpoints}
}

// timeout says why a hold that reached its deadline ends.
func (g *sourceGuard) timeout() string {
	h := g.hold
	if h.until.Equal(h.since.Add(maxHoldFactor * g.rules.Hold)) {
		return fmt.Sprintf("the hold reached its limit of %s", maxHoldFactor*g.rules.Hold)
	}
	return fmt.Sprintf("the source brought nothing back for %s", g.rules.Hold)
}

// end makes what the source reports the served state.
func (g *sourceGuard) end() {
	g.eff, g.hold = reclaim.Map(g.hold.rep, &g.peak), nil
	g.live = countLive(g.eff)
	g.publishStatus()
}

func (g *sourceGuard) publishStatus() {
	if g.view == nil {
		return
	}
	var gs *GuardSnapshot
	if h := g.hold; h != nil {
		gs = &GuardSnapshot{Since: h.since, Until: h.until, Reason: h.reason,
			HeldServices: h.services, HeldEndpoints: h.endpoints}
	}
	g.view.setGuard(gs)
}

// missing returns the endpoints of old whose address and port are absent
// from cur.
func missing(old, cur sources.Service) []sources.Endpoint {
	have := make(map[epKey]bool, len(cur.Endpoints))
	for _, e := range cur.Endpoints {
		have[epKey{e.Address, e.Port}] = true
	}
	var lost []sources.Endpoint
	for _, e := range old.Endpoints {
		if !have[epKey{e.Address, e.Port}] {
			lost = append(lost, e)
		}
	}
	return lost
}

// applyUpdate applies u to state (a source's services by name) as the
// Update contract says, and returns the names it may have changed.
func applyUpdate(state map[string]sources.Service, u sources.Update) (touched []string) {
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
