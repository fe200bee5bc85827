package manager

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// defaultGuard is the guard every source gets from the configuration's
// defaults.
var defaultGuard = Guard{Hold: DefaultGuardHold, MaxRemovedFraction: DefaultMaxRemovedFraction, MinRemoved: DefaultMinRemoved}

// many returns n services svc0..svc(n-1), each with per endpoints.
func many(n, per int) []sources.Service {
	out := make([]sources.Service, n)
	for i := range out {
		var addrs []string
		for j := range per {
			addrs = append(addrs, fmt.Sprintf("10.%d.%d.1", i, j))
		}
		out[i] = testSvc(fmt.Sprintf("svc%d", i), addrs...)
	}
	return out
}

// emptied returns ss with the services named in names left without
// endpoints.
func emptied(ss []sources.Service, names ...string) []sources.Service {
	out := slices.Clone(ss)
	for i := range out {
		if slices.Contains(names, out[i].Name) {
			out[i] = sources.Service{Name: out[i].Name}
		}
	}
	return out
}

// served applies u to state, as the merger does, and returns state.
func served(state map[string]sources.Service, u sources.Update) map[string]sources.Service {
	applyUpdate(state, u)
	return state
}

func TestGuardRules(t *testing.T) {
	dns := []sources.Service{testSvc("api", "10.0.0.1", "10.0.0.2", "10.0.0.3"), testSvc("web", "10.0.1.1", "10.0.1.2"), testSvc("db", "10.0.2.1")}
	file := []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.2"), testSvc("api", "10.0.1.1"), testSvc("payments", "10.0.2.1"), testSvc("search", "10.0.3.1", "10.0.3.2")}
	twenty := many(20, 3)
	perService := defaultGuard
	perService.PerService = true
	tests := []struct {
		name   string
		guard  Guard // defaultGuard when zero
		before []sources.Service
		up     sources.Update
		held   string // a part of the hold's reason; "" for no hold
	}{
		{name: "last instance deregistered", before: file,
			up: upsertUp(sources.Service{Name: "api"})},
		{name: "last instance deregistered, service removed (on_empty: remove)", before: file,
			up: removeUp("api")},
		{name: "scale-down from four instances to one", before: []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")},
			up: upsertUp(testSvc("web", "10.0.0.1"))},
		{name: "one of several names answers NXDOMAIN", before: dns,
			up: upsertUp(sources.Service{Name: "web"})},
		{name: "one SRV target of three dropped", before: dns,
			up: upsertUp(testSvc("api", "10.0.0.1", "10.0.0.3"))},
		{name: "a few services removed from a file", before: file,
			up: fullUp(file[0])},
		{name: "four of five services removed: under the floor", before: many(5, 1),
			up: fullUp(many(1, 1)...)},
		{name: "five of six services removed: a mass removal", before: many(6, 1),
			up: fullUp(many(1, 1)...), held: "mass removal: 5 of the 6 services"},
		{name: "half of the services is not most", before: twenty,
			up: fullUp(twenty[:10]...)},
		{name: "every service loses endpoints but keeps one (a node failure)", before: twenty,
			up: fullUp(many(20, 1)...)},
		{name: "most endpoints of one service removed, per-service rule off", before: []sources.Service{testSvc("web", addrs(20)...)},
			up: upsertUp(testSvc("web", addrs(5)...))},
		{name: "source emptied: full update with no services", before: file,
			up: fullUp(), held: "source emptied: no service has endpoints left (4 had)"},
		{name: "source emptied: every service present but empty", before: dns,
			up: fullUp(emptied(dns, "api", "web", "db")...), held: "source emptied: no service has endpoints left (3 had)"},
		{name: "source emptied: the last name answers NXDOMAIN", before: emptied(dns, "api", "web"),
			up: upsertUp(sources.Service{Name: "db"}), held: "source emptied"},
		{name: "source emptied: a single service's last instance", before: []sources.Service{testSvc("web", "10.0.0.1")},
			up: removeUp("web"), held: "source emptied"},
		{name: "only empty services removed", before: emptied(dns, "api", "web", "db"),
			up: fullUp()},
		{name: "mass removal: most services gone", before: twenty,
			up: fullUp(twenty[:9]...), held: "mass removal: 11 of the 20 services"},
		{name: "mass removal: most services emptied", before: twenty,
			up: upsertUp(emptied(twenty[:11], names20(11)...)...), held: "mass removal: 11 of the 20 services"},
		{name: "per-service rule: most endpoints of one service removed", guard: perService,
			before: []sources.Service{testSvc("web", addrs(20)...), testSvc("api", "10.0.0.1")},
			up:     upsertUp(testSvc("web", addrs(5)...)), held: "service web: 15 of its 20 endpoints removed"},
		{name: "per-service rule: a scale-down under the floor", guard: perService,
			before: []sources.Service{testSvc("web", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")},
			up:     upsertUp(testSvc("web", "10.0.0.1"))},
		{name: "reset", before: file,
			up: sources.Update{Full: true, Services: file[:2], Reset: true}, held: "registry reset"},
		{name: "reset with nothing to hold", before: nil,
			up: sources.Update{Full: true, Services: file, Reset: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := tt.guard
			if guard == (Guard{}) {
				guard = defaultGuard
			}
			view := &statusView{}
			g := newGuard(guard, view)
			g.receive(fullUp(tt.before...), time.Unix(0, 0))
			want := served(maps.Clone(g.eff), tt.up)
			out, ev := g.receive(tt.up, time.Unix(1, 0))
			snap := (Named{view: view}).snapshot()
			if tt.held == "" {
				if ev.reason != "" || snap.Guard != nil || snap.GuardHolds != 0 {
					t.Fatalf("held (%q), want the update applied at once", ev.reason)
				}
				if got := served(g.eff, sources.Update{}); !maps.EqualFunc(got, want, sources.Service.Equal) {
					t.Errorf("served %v, want %v", got, want)
				}
				if !slices.EqualFunc(out.Services, tt.up.Services, sources.Service.Equal) || !slices.Equal(out.Removed, tt.up.Removed) || out.Full != tt.up.Full {
					t.Errorf("out = %+v, want the update itself", out)
				}
				if g.live != countLive(want) {
					t.Errorf("live = %d, want %d", g.live, countLive(want))
				}
				return
			}
			if !strings.Contains(ev.reason, tt.held) || snap.Guard == nil || !strings.Contains(snap.Guard.Reason, tt.held) || snap.GuardHolds != 1 {
				t.Fatalf("reason %q, guard %+v; want a hold because %q", ev.reason, snap.Guard, tt.held)
			}
			// What was live is still served with every endpoint it had.
			for _, b := range tt.before {
				if len(missing(b, g.eff[b.Name])) > 0 {
					t.Errorf("%s served as %v during the hold, want %v", b.Name, g.eff[b.Name], b)
				}
			}
		})
	}
}

// addrs returns n addresses.
func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	return out
}

// names20 returns the names of the first n services of many.
func names20(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc%d", i)
	}
	return out
}

// guardRun drives a guard through a sequence of updates on a clock of its
// own, keeping what the merged state serves for the source.
type guardRun struct {
	t     *testing.T
	g     *sourceGuard
	now   time.Time
	state map[string]sources.Service
	ended []string // why each hold ended
}

func newGuardRun(t *testing.T, guard Guard, before []sources.Service) *guardRun {
	t.Helper()
	r := &guardRun{t: t, g: newGuard(guard, &statusView{}), now: time.Unix(1000, 0), state: map[string]sources.Service{}}
	r.send(fullUp(before...))
	return r
}

// send passes u through the guard at the run's clock, after releasing a
// hold whose deadline passed.
func (r *guardRun) send(u sources.Update) holdEvent {
	r.tick(0)
	out, ev := r.g.receive(u, r.now)
	served(r.state, out)
	if ev.why != "" {
		r.ended = append(r.ended, ev.why)
	}
	return ev
}

// tick moves the clock on by d and releases a hold that is due.
func (r *guardRun) tick(d time.Duration) {
	r.now = r.now.Add(d)
	if dl := r.g.deadline(); !dl.IsZero() && !r.now.Before(dl) {
		out, ev := r.g.release(r.g.timeout())
		served(r.state, out)
		r.ended = append(r.ended, ev.why)
	}
}

// has fails unless every service of want is served with (at least) its
// endpoints.
func (r *guardRun) has(step string, want ...sources.Service) {
	r.t.Helper()
	for _, w := range want {
		got, ok := r.state[w.Name]
		if !ok || len(missing(w, got)) > 0 {
			r.t.Fatalf("%s: %s served as %v (present %t), want at least %v", step, w.Name, got, ok, w)
		}
	}
}

// only fails unless exactly names are served.
func (r *guardRun) only(step string, names ...string) {
	r.t.Helper()
	got := slices.Sorted(maps.Keys(r.state))
	slices.Sort(names)
	if !slices.Equal(got, names) {
		r.t.Fatalf("%s: serving %v, want %v", step, got, names)
	}
}

func TestGuardResetRefill(t *testing.T) {
	const hold = 30 * time.Second
	guard := defaultGuard
	all := many(10, 2)
	r := newGuardRun(t, guard, all)

	// The agent restarted empty: nothing is removed.
	if ev := r.send(sources.Update{Full: true, Reset: true}); !strings.Contains(ev.reason, "registry reset") {
		t.Fatalf("reset did not start a hold: %+v", ev)
	}
	r.has("reset", all...)
	// The refill: services come back one by one over more than a hold in
	// all, a new one appears, and one that came back goes again. Nothing
	// of the old state is removed in between, the new one flows at once.
	fresh := testSvc("fresh", "10.9.0.1")
	reported := []sources.Service{fresh}
	for i := range 8 {
		r.tick(hold / 2)
		reported = append(reported, all[i])
		r.send(fullUp(reported...))
		r.has(fmt.Sprintf("refill step %d", i), append([]sources.Service{fresh}, all...)...)
	}
	r.tick(hold / 2)
	r.send(removeUp("svc3"))
	r.has("a refilled service gone again", all...)
	if r.g.hold == nil || len(r.ended) > 0 {
		t.Fatalf("hold ended during the refill: %v", r.ended)
	}
	// A second reset, which brings nothing back, starts another refill and
	// so keeps the hold on.
	r.tick(hold/2 - time.Second)
	r.send(sources.Update{Reset: true})
	r.tick(hold - time.Second)
	r.has("after the second reset", all...)
	if r.g.hold == nil {
		t.Fatalf("hold ended after the second reset: %v", r.ended)
	}
	// The refill settles: what never came back is removed, once.
	r.tick(time.Second)
	r.only("settled", "fresh", "svc0", "svc1", "svc2", "svc4", "svc5", "svc6", "svc7")
	if len(r.ended) != 1 || !strings.Contains(r.ended[0], "brought nothing back") {
		t.Errorf("hold ended because %q, want one end after the refill settled", r.ended)
	}
}

func TestGuardHoldEnds(t *testing.T) {
	const hold = 30 * time.Second
	all := many(4, 1)
	t.Run("everything back ends the hold at once", func(t *testing.T) {
		r := newGuardRun(t, defaultGuard, all)
		r.send(fullUp())
		r.send(fullUp(all[:2]...))
		r.has("half back", all...)
		r.send(fullUp(all...))
		if r.g.hold != nil || len(r.ended) != 1 || !strings.Contains(r.ended[0], "came back") {
			t.Fatalf("hold on %v, ended %q; want it over", r.g.hold != nil, r.ended)
		}
		// The guard judges the next update afresh.
		r.send(removeUp("svc0"))
		r.only("after the hold", "svc1", "svc2", "svc3")
	})
	t.Run("a reset that misses nothing holds later removals until it settles", func(t *testing.T) {
		r := newGuardRun(t, defaultGuard, all)
		r.send(sources.Update{Full: true, Services: all, Reset: true})
		if r.g.hold == nil {
			t.Fatal("no hold after a reset")
		}
		r.tick(hold / 2)
		r.send(removeUp("svc0"))
		r.has("removal after the reset", all...)
		r.tick(hold/2 - time.Second)
		r.has("just before the deadline", all...)
		r.tick(time.Second)
		r.only("settled", "svc1", "svc2", "svc3")
	})
	t.Run("a source that keeps bringing things back is held at most ten holds", func(t *testing.T) {
		r := newGuardRun(t, defaultGuard, all)
		r.send(fullUp())
		for i := range 25 {
			r.tick(hold / 2)
			if r.g.hold == nil {
				if i+1 != 2*maxHoldFactor {
					t.Fatalf("hold ended after %d half-holds, want %d", i+1, 2*maxHoldFactor)
				}
				break
			}
			r.send(fullUp(all[i%2]))
			r.send(fullUp())
		}
		if len(r.ended) != 1 || !strings.Contains(r.ended[0], "limit") {
			t.Errorf("ended %q, want the limit", r.ended)
		}
		r.only("after the limit")
	})
	t.Run("confirm", func(t *testing.T) {
		r := newGuardRun(t, defaultGuard, all)
		r.send(fullUp())
		r.send(upsertUp(testSvc("new", "10.8.0.1")))
		r.has("held", all...)
		out, ev := r.g.release("confirmed by an operator")
		served(r.state, out)
		r.only("confirmed", "new")
		if ev.services != 4 || ev.endpoints != 0 || r.g.hold != nil || (Named{view: r.g.view}).snapshot().Guard != nil {
			t.Errorf("event %+v, hold %v; want 4 services removed and no hold", ev, r.g.hold)
		}
	})
}
