package dns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait in these tests. It is a failure detector, not
// a measurement: a loaded machine must never reach it, so it is far longer
// than anything waited for takes.
const patience = 30 * time.Second

// running is a Source under test, run until the test ends.
type running struct {
	up     chan sources.Update
	status *sources.Status
}

// start runs a source of cfg; setup, if any, adjusts it before it runs.
func start(t *testing.T, cfg map[string]any, setup ...func(*Source)) *running {
	t.Helper()
	st := sources.NewStatus("test")
	src, err := New(cfg, sources.Options{Name: "test", Status: st})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, f := range setup {
		f(src.(*Source))
	}
	r := &running{up: make(chan sources.Update), status: st}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, r.up) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	return r
}

func (r *running) next(t *testing.T) sources.Update {
	t.Helper()
	return receive(t, r.up, func() string { return fmt.Sprintf("update (status %+v)", r.status.Snapshot()) })
}

// receive returns the next value on ch; after patience it fails the test,
// saying what it waited for.
func receive[T any](t *testing.T, ch <-chan T, what func() string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("no %s within %s", what(), patience)
	}
	var zero T
	return zero
}

// quiet waits until cond holds and asserts that no update was sent by
// then.
func (r *running) quiet(t *testing.T, cond func() bool) {
	t.Helper()
	waitFor(t, cond)
	select {
	case u := <-r.up:
		t.Fatalf("unexpected update %+v", u)
	default:
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", patience)
		}
		<-tick.C
	}
}

// queryTimeout is the tests' per-query timeout. It is generous: a server
// that answers must never be timed out by a loaded machine, or the resolver
// would rightly move on and the counts of queries the tests check would
// change. A test of a silent server sets its own.
const queryTimeout = 5 * time.Second

// baseConfig is a source of services on servers, refreshed often.
func baseConfig(servers []string, services ...map[string]any) map[string]any {
	list := make([]any, len(services))
	for i, s := range services {
		list[i] = s
	}
	return map[string]any{
		"servers":  servers,
		"timeout":  queryTimeout.String(),
		"refresh":  map[string]any{"min": "50ms", "max": "1s"},
		"services": list,
	}
}

func srvService(cluster, name string) map[string]any {
	return map[string]any{"cluster": cluster, "srv": name}
}

func TestSourceLookups(t *testing.T) {
	soa := []string{"example.org. 60 IN SOA ns.example.org. admin.example.org. 1 60 60 600 5"}
	cases := []struct {
		name    string
		setup   func(f *fakeServer)
		service map[string]any
		family  string
		want    []sources.Endpoint
		dropped uint64
		check   func(t *testing.T, f *fakeServer)
	}{
		{
			name: "additional section used, no address queries",
			setup: func(f *fakeServer) {
				f.set(api, mdns.TypeSRV, reply{
					answer: srvs(api, 60, "10 0 80 a.example.org.", "10 10 80 b.example.org.", "20 60 81 c.example.org."),
					extra:  []string{"a.example.org. 60 IN A 10.0.0.1", "b.example.org. 60 IN A 10.0.0.2", "c.example.org. 60 IN AAAA 2001:db8::3"},
				})
			},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0), ep("10.0.0.2", 80, 10, 0), ep("2001:db8::3", 81, 60, 1)},
			check: func(t *testing.T, f *fakeServer) {
				t.Helper()
				if n := f.count("a.example.org.", mdns.TypeA, "") + f.count("c.example.org.", mdns.TypeAAAA, ""); n != 0 {
					t.Errorf("%d address queries, want 0", n)
				}
			},
		},
		{
			name: "separate A and AAAA lookups",
			setup: func(f *fakeServer) {
				f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 5 80 a.example.org.")})
				f.set("a.example.org.", mdns.TypeA, reply{answer: []string{"a.example.org. 60 IN A 10.0.0.1"}})
				f.set("a.example.org.", mdns.TypeAAAA, reply{answer: []string{"a.example.org. 60 IN AAAA 2001:db8::1"}})
			},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 5, 0), ep("2001:db8::1", 80, 5, 0)},
		},
		{
			name:   "family ipv4 asks for A only",
			family: "ipv4",
			setup: func(f *fakeServer) {
				f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 5 80 a.example.org.")})
				f.set("a.example.org.", mdns.TypeA, reply{answer: []string{"a.example.org. 60 IN A 10.0.0.1"}})
				f.set("a.example.org.", mdns.TypeAAAA, reply{answer: []string{"a.example.org. 60 IN AAAA 2001:db8::1"}})
			},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 5, 0)},
			check: func(t *testing.T, f *fakeServer) {
				t.Helper()
				if n := f.count("a.example.org.", mdns.TypeAAAA, ""); n != 0 {
					t.Errorf("%d AAAA queries, want 0", n)
				}
			},
		},
		{
			name: "CNAME chains the server leaves incomplete are followed",
			setup: func(f *fakeServer) {
				f.set("svc.example.org.", mdns.TypeSRV, reply{answer: []string{"svc.example.org. 60 IN CNAME " + api}})
				f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 1 80 alias.example.org.")})
				f.set("alias.example.org.", mdns.TypeA, reply{answer: []string{"alias.example.org. 60 IN CNAME real.example.org."}})
				f.set("alias.example.org.", mdns.TypeAAAA, reply{ns: soa})
				f.set("real.example.org.", mdns.TypeA, reply{answer: []string{"real.example.org. 60 IN A 10.9.9.9"}})
			},
			service: srvService("api", "svc.example.org"),
			want:    []sources.Endpoint{ep("10.9.9.9", 80, 1, 0)},
		},
		{
			name:  "target . is an empty service",
			setup: func(f *fakeServer) { f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 0 0 .")}) },
		},
		{
			name:  "NXDOMAIN is an empty service",
			setup: func(f *fakeServer) { f.set(api, mdns.TypeSRV, reply{rcode: mdns.RcodeNameError, ns: soa}) },
		},
		{
			name:  "NODATA is an empty service",
			setup: func(f *fakeServer) { f.set(api, mdns.TypeSRV, reply{ns: soa}) },
		},
		{
			name: "truncated UDP answer is asked again over TCP",
			setup: func(f *fakeServer) {
				f.set(api, mdns.TypeSRV, reply{truncUDP: true, answer: srvs(api, 60, "0 1 80 a.example.org."),
					extra: []string{"a.example.org. 60 IN A 10.0.0.1"}})
			},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0)},
			check: func(t *testing.T, f *fakeServer) {
				t.Helper()
				if n := f.count(api, mdns.TypeSRV, "tcp"); n == 0 {
					t.Error("no TCP query after truncation")
				}
			},
		},
		{
			name: "targets that do not resolve are dropped and counted",
			setup: func(f *fakeServer) {
				f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 1 80 a.example.org.", "0 1 80 gone.example.org.", "1 1 80 nodata.example.org.")})
				f.set("a.example.org.", mdns.TypeA, reply{answer: []string{"a.example.org. 60 IN A 10.0.0.1"}})
				f.set("a.example.org.", mdns.TypeAAAA, reply{ns: soa})
				f.set("nodata.example.org.", mdns.TypeA, reply{ns: soa})
				f.set("nodata.example.org.", mdns.TypeAAAA, reply{ns: soa})
			},
			want:    []sources.Endpoint{ep("10.0.0.1", 80, 1, 0)},
			dropped: 2,
		},
		{
			name: "host entry: one endpoint per address",
			setup: func(f *fakeServer) {
				f.set("web.example.org.", mdns.TypeA, reply{answer: []string{"web.example.org. 60 IN A 10.0.0.1", "web.example.org. 60 IN A 10.0.0.2"}})
				f.set("web.example.org.", mdns.TypeAAAA, reply{answer: []string{"web.example.org. 60 IN AAAA 2001:db8::1"}})
			},
			service: map[string]any{"cluster": "api", "host": "web.example.org", "port": 8080},
			want:    []sources.Endpoint{ep("10.0.0.1", 8080, 1, 0), ep("10.0.0.2", 8080, 1, 0), ep("2001:db8::1", 8080, 1, 0)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			tc.setup(f)
			svc := tc.service
			if svc == nil {
				svc = srvService("api", "_api._tcp.example.org")
			}
			cfg := baseConfig([]string{f.addr}, svc)
			if tc.family != "" {
				cfg["family"] = tc.family
			}
			r := start(t, cfg)
			u := r.next(t)
			if !u.Full || len(u.Services) != 1 || u.Services[0].Name != "api" {
				t.Fatalf("first update %+v, want Full with service api", u)
			}
			if got := u.Services[0].Endpoints; !slices.EqualFunc(got, tc.want, sources.Endpoint.Equal) {
				t.Errorf("endpoints:\n got %v\nwant %v", got, tc.want)
			}
			snap := r.status.Snapshot()
			if !snap.Synced || snap.Stale || snap.Dropped < tc.dropped || (tc.dropped == 0 && snap.Dropped != 0) {
				t.Errorf("status %+v, want synced, fresh, %d dropped", snap, tc.dropped)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestSourceFailures(t *testing.T) {
	cases := []struct {
		name  string
		reply reply
	}{
		{"SERVFAIL", reply{rcode: mdns.RcodeServerFailure}},
		{"REFUSED", reply{rcode: mdns.RcodeRefused}},
		{"timeout", reply{silent: true}},
		{"malformed: another question", reply{wrongQ: true, answer: srvs(api, 60, "0 1 80 a.example.org.")}},
		{"malformed: unparsable", reply{garbage: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.set(api, mdns.TypeSRV, tc.reply)
			cfg := baseConfig([]string{f.addr}, srvService("api", api))
			if tc.reply.silent {
				cfg["timeout"] = "300ms"
			}
			r := start(t, cfg)
			r.quiet(t, func() bool { return f.count(api, mdns.TypeSRV, "") >= 3 })
			snap := r.status.Snapshot()
			if snap.Synced || !snap.Stale || snap.Failures == 0 || snap.LastError == "" {
				t.Errorf("status %+v, want failing and not synced", snap)
			}
		})
	}
}

// A target whose address query fails (rather than being answered
// negatively) fails the whole lookup: a failing server must not remove
// endpoints.
func TestSourceTargetFailure(t *testing.T) {
	f := newFakeServer(t)
	f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 1 80 a.example.org.", "0 1 80 b.example.org.")})
	f.set("a.example.org.", mdns.TypeA, reply{answer: []string{"a.example.org. 60 IN A 10.0.0.1"}})
	f.set("a.example.org.", mdns.TypeAAAA, reply{})
	f.set("b.example.org.", mdns.TypeA, reply{rcode: mdns.RcodeServerFailure})
	r := start(t, baseConfig([]string{f.addr}, srvService("api", api)))
	r.quiet(t, func() bool { return f.count("b.example.org.", mdns.TypeA, "") >= 3 })
	if snap := r.status.Snapshot(); snap.Synced || !snap.Stale {
		t.Errorf("status %+v, want failing and not synced", snap)
	}
}

func TestSourceServersInTurn(t *testing.T) {
	bad, silent, good := newFakeServer(t), newFakeServer(t), newFakeServer(t)
	bad.set(api, mdns.TypeSRV, reply{rcode: mdns.RcodeServerFailure})
	silent.set(api, mdns.TypeSRV, reply{silent: true})
	good.set(api, mdns.TypeSRV, reply{answer: srvs(api, 60, "0 1 80 a.example.org."), extra: []string{"a.example.org. 60 IN A 10.0.0.1"}})
	cfg := baseConfig([]string{bad.addr, silent.addr, good.addr}, srvService("api", api))
	cfg["refresh"] = map[string]any{"min": "50ms", "max": "100ms"}
	// The silent server costs one timeout; the good one, which must never
	// time out, has as long to answer.
	cfg["timeout"] = "2s"
	r := start(t, cfg)
	u := r.next(t)
	if len(u.Services) != 1 || len(u.Services[0].Endpoints) != 1 {
		t.Fatalf("update %+v, want the good server's endpoint", u)
	}
	if bad.count(api, mdns.TypeSRV, "") == 0 || silent.count(api, mdns.TypeSRV, "") == 0 {
		t.Error("servers not tried in turn")
	}
	// Later queries start with the server that answered.
	n := good.count(api, mdns.TypeSRV, "")
	waitFor(t, func() bool { return good.count(api, mdns.TypeSRV, "") >= n+2 })
	if got := bad.count(api, mdns.TypeSRV, "") + silent.count(api, mdns.TypeSRV, ""); got != 2 {
		t.Errorf("failing servers asked %d times, want 2 (once each, before the good one answered)", got)
	}
}

func TestSourceUpdates(t *testing.T) {
	f := newFakeServer(t)
	web := "_web._tcp.example.org."
	f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 1, "0 1 80 a.example.org."), extra: []string{"a.example.org. 1 IN A 10.0.0.1"}})
	f.set(web, mdns.TypeSRV, reply{answer: srvs(web, 1, "0 1 80 w.example.org."), extra: []string{"w.example.org. 1 IN A 10.0.1.1"}})
	cfg := baseConfig([]string{f.addr}, srvService("api", api), srvService("web", web))
	cfg["refresh"] = map[string]any{"min": "50ms", "max": "100ms"}
	r := start(t, cfg)
	u := r.next(t)
	if !u.Full || len(u.Services) != 2 {
		t.Fatalf("first update %+v, want Full with 2 services", u)
	}

	// Refreshes that change nothing publish nothing.
	n := f.count(api, mdns.TypeSRV, "")
	r.quiet(t, func() bool { return f.count(api, mdns.TypeSRV, "") >= n+3 })

	// A change of one name sends that service alone.
	f.set(api, mdns.TypeSRV, reply{answer: srvs(api, 1, "0 1 80 a.example.org.", "0 1 80 b.example.org."),
		extra: []string{"a.example.org. 1 IN A 10.0.0.1", "b.example.org. 1 IN A 10.0.0.2"}})
	u = r.next(t)
	if u.Full || len(u.Services) != 1 || u.Services[0].Name != "api" || len(u.Services[0].Endpoints) != 2 {
		t.Fatalf("update %+v, want partial with api's 2 endpoints", u)
	}

	// An outage publishes nothing and makes the source stale.
	f.set(api, mdns.TypeSRV, reply{rcode: mdns.RcodeServerFailure})
	n = f.count(api, mdns.TypeSRV, "")
	r.quiet(t, func() bool { return f.count(api, mdns.TypeSRV, "") >= n+3 })
	if snap := r.status.Snapshot(); !snap.Stale || !snap.Synced {
		t.Fatalf("status during outage %+v, want synced and stale", snap)
	}

	// Recovery with an authoritative NXDOMAIN empties the service.
	f.set(api, mdns.TypeSRV, reply{rcode: mdns.RcodeNameError})
	u = r.next(t)
	if len(u.Services) != 1 || u.Services[0].Name != "api" || len(u.Services[0].Endpoints) != 0 {
		t.Fatalf("update %+v, want api emptied", u)
	}
	waitFor(t, func() bool { return !r.status.Snapshot().Stale })
}

// timers stands in for a source's clock (Source.after): it records every
// delay the source asks to wait, and lets a wait end only when the test
// fires it, so that the schedule is asserted exactly and costs no time.
type timers struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newTimers() *timers {
	return &timers{asked: make(chan time.Duration, 16), fire: make(chan time.Time)}
}

func (ts *timers) after(d time.Duration) <-chan time.Time {
	ts.asked <- d
	return ts.fire
}

// next returns the next delay asked for.
func (ts *timers) next(t *testing.T) time.Duration {
	t.Helper()
	return receive(t, ts.asked, func() string { return "timer asked for" })
}

// elapse ends the wait the source is in.
func (ts *timers) elapse(t *testing.T) {
	t.Helper()
	select {
	case ts.fire <- time.Time{}:
	case <-time.After(patience):
		t.Fatalf("the source was not waiting on its timer within %s", patience)
	}
}

func TestRefreshSchedule(t *testing.T) {
	servfail := reply{rcode: mdns.RcodeServerFailure}
	cases := []struct {
		name    string
		reply   reply // the SRV answer; every other name is NXDOMAIN
		refresh map[string]any
		want    [][2]time.Duration // bounds of the delays asked for, in turn
	}{
		{"TTL drives the refresh", ttlReply(1), map[string]any{"min": "100ms", "max": "10s", "jitter": 0.1},
			[][2]time.Duration{{900 * time.Millisecond, time.Second}, {900 * time.Millisecond, time.Second}}},
		{"long TTL clamped to max", ttlReply(3600), map[string]any{"min": "50ms", "max": "300ms", "jitter": 0},
			[][2]time.Duration{{300 * time.Millisecond, 300 * time.Millisecond}, {300 * time.Millisecond, 300 * time.Millisecond}}},
		{"TTL 0 clamped to min", ttlReply(0), map[string]any{"min": "200ms", "max": "10s", "jitter": 0},
			[][2]time.Duration{{200 * time.Millisecond, 200 * time.Millisecond}, {200 * time.Millisecond, 200 * time.Millisecond}}},
		{"fixed interval ignores the TTL", ttlReply(3600), map[string]any{"min": "50ms", "max": "1h", "interval": "250ms", "jitter": 0},
			[][2]time.Duration{{250 * time.Millisecond, 250 * time.Millisecond}, {250 * time.Millisecond, 250 * time.Millisecond}}},
		// The backoff's waits are drawn from the second half of each
		// step, whatever refresh.jitter says.
		{"failures back off from min to max", servfail, map[string]any{"min": "50ms", "max": "150ms", "jitter": 0},
			[][2]time.Duration{{25 * time.Millisecond, 50 * time.Millisecond}, {50 * time.Millisecond, 100 * time.Millisecond},
				{75 * time.Millisecond, 150 * time.Millisecond}, {75 * time.Millisecond, 150 * time.Millisecond}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.set(api, mdns.TypeSRV, tc.reply)
			cfg := baseConfig([]string{f.addr}, srvService("api", api))
			cfg["refresh"] = tc.refresh
			clock := newTimers()
			r := start(t, cfg, func(s *Source) { s.after = clock.after })
			if tc.reply.rcode == mdns.RcodeSuccess {
				r.next(t)
			}
			for i, want := range tc.want {
				if i > 0 {
					queried := f.count(api, mdns.TypeSRV, "")
					clock.elapse(t)
					waitFor(t, func() bool { return f.count(api, mdns.TypeSRV, "") > queried })
				}
				if d := clock.next(t); d < want[0] || d > want[1] {
					t.Errorf("delay %d = %s, want within [%s, %s]", i+1, d, want[0], want[1])
				}
			}
		})
	}
}

// ttlReply answers the SRV name with one target whose records have ttl.
func ttlReply(ttl int) reply {
	return reply{answer: srvs(api, ttl, "0 1 80 a.example.org."), extra: []string{"a.example.org. 3600 IN A 10.0.0.1"}}
}

func TestResolverSearchList(t *testing.T) {
	f := newFakeServer(t)
	f.set("_api._tcp.b.example.", mdns.TypeSRV, reply{answer: srvs("_api._tcp.b.example.", 60, "0 1 80 a.b.example."),
		extra: []string{"a.b.example. 60 IN A 10.0.0.1"}})
	r := &resolver{
		servers:  []string{f.addr},
		udp:      &mdns.Client{Net: "udp", UDPSize: 1232, Timeout: queryTimeout},
		ednsSize: 1232,
		tcp:      &mdns.Client{Net: "tcp", Timeout: queryTimeout},
		names:    (&mdns.ClientConfig{Search: []string{"a.example", "b.example"}, Ndots: 1}).NameList,
	}
	res, err := lookup(t.Context(), r, entry{cluster: "api", kind: KindSRV, name: "_api._tcp"}, FamilyAny)
	if err != nil || len(res.Endpoints) != 1 {
		t.Fatalf("lookup: %v, %+v; want the endpoint found through the search list", err, res)
	}
	if f.count("_api._tcp.a.example.", mdns.TypeSRV, "") != 1 {
		t.Error("first search domain not tried")
	}
	// A fully qualified name ignores the search list.
	before := f.count("_api._tcp.", mdns.TypeSRV, "")
	if _, err := lookup(t.Context(), r, entry{cluster: "api", kind: KindSRV, name: "_api._tcp."}, FamilyAny); err != nil {
		t.Fatal(err)
	}
	if f.count("_api._tcp.a.example.", mdns.TypeSRV, "") != 1 || f.count("_api._tcp.", mdns.TypeSRV, "") != before+1 {
		t.Error("fully qualified name expanded with the search list")
	}
}
