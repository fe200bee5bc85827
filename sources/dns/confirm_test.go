package dns

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The confirmation of darkenings against the fake server. Names with TTL
// 3600 are looked up at the start and then only by confirmation rounds
// (refresh.max is an hour), so their query counts count the rounds; names
// with TTL 0 are refreshed every refresh.min.

// confirmName is the SRV name of cluster c.
func confirmName(c string) string { return "_" + c + "._tcp.example.org." }

// serve makes the fake server answer cluster c's name with one endpoint,
// 10.0.0.n:80, with the given TTL.
func serve(f *fakeServer, c string, ttl, n int) {
	f.set(confirmName(c), mdns.TypeSRV, answerOf(c, ttl, n))
}

func answerOf(c string, ttl, n int) reply {
	target := c + ".hosts.example.org."
	return reply{answer: srvs(confirmName(c), ttl, "0 1 80 "+target),
		extra: []string{fmt.Sprintf("%s %d IN A 10.0.0.%d", target, ttl, n)}}
}

// nxdomain makes the fake server answer NXDOMAIN for cluster c's name.
func nxdomain(f *fakeServer, c string) {
	f.set(confirmName(c), mdns.TypeSRV, reply{rcode: mdns.RcodeNameError})
}

// startConfirm serves each cluster with the TTL given, starts a source of
// them with refresh.min and returns it once its Full update came.
func startConfirm(t *testing.T, f *fakeServer, refresh map[string]any, ttls map[string]int) *running {
	t.Helper()
	var svcs []map[string]any
	for i, c := range slices.Sorted(maps.Keys(ttls)) {
		serve(f, c, ttls[c], i+1)
		svcs = append(svcs, srvService(c, confirmName(c)))
	}
	cfg := baseConfig([]string{f.addr}, svcs...)
	cfg["refresh"] = refresh // baseConfig's query timeout: a retried query would count as a round
	r := start(t, cfg)
	if u := r.next(t); !u.Full || len(u.Services) != len(ttls) {
		t.Fatalf("first update %+v, want Full with %d services", u, len(ttls))
	}
	return r
}

// expect waits for the next update and fails unless it is partial and
// carries exactly the services of want, with that many endpoints each.
func (r *running) expect(t *testing.T, want map[string]int, why string) {
	t.Helper()
	u := r.next(t)
	if got := endpointCounts(u); u.Full || !maps.Equal(got, want) {
		t.Fatalf("update %v (full %t), want %v: %s", got, u.Full, want, why)
	}
}

// asked returns how many times the fake server was asked for cluster c.
func asked(f *fakeServer, c string) int { return f.count(confirmName(c), mdns.TypeSRV, "") }

// endpointCounts maps each service of u to its number of endpoints.
func endpointCounts(u sources.Update) map[string]int {
	out := map[string]int{}
	for _, s := range u.Services {
		out[s.Name] = len(s.Endpoints)
	}
	return out
}

var fastRefresh = map[string]any{"min": "50ms", "max": "1h", "jitter": 0}

// Every name answers NXDOMAIN, their TTLs far apart: the first that goes
// dark brings the others with it, in one update.
func TestConfirmEveryNameDark(t *testing.T) {
	f := newFakeServer(t)
	r := startConfirm(t, f, fastRefresh, map[string]int{"a": 0, "b": 3600, "c": 3600, "d": 3600})
	for _, c := range []string{"b", "c", "d", "a"} { // a, refreshed, last
		nxdomain(f, c)
	}
	r.expect(t, map[string]int{"a": 0, "b": 0, "c": 0, "d": 0}, "every service emptied in one update")
	if n := asked(f, "b"); n != 2 {
		t.Errorf("b was asked %d times, want 2 (the start and one confirmation)", n)
	}
}

// One name answers NXDOMAIN among several: it is reported alone, after one
// round; a name that stays dark, or lights up again, starts no round.
func TestConfirmOneNameDark(t *testing.T) {
	f := newFakeServer(t)
	r := startConfirm(t, f, fastRefresh, map[string]int{"a": 0, "b": 3600, "c": 3600})
	nxdomain(f, "a")
	r.expect(t, map[string]int{"a": 0}, "a emptied alone")
	if n := asked(f, "b"); n != 2 {
		t.Errorf("b was asked %d times, want 2 (the start and one confirmation)", n)
	}
	n := asked(f, "a")
	r.quiet(t, func() bool { return asked(f, "a") >= n+3 })
	serve(f, "a", 0, 9)
	r.expect(t, map[string]int{"a": 1}, "a back with its endpoint")
	if n := asked(f, "b"); n != 2 {
		t.Errorf("b was asked %d times, want still 2: only a darkening starts a round", n)
	}
}

// A name whose confirmation fails keeps its endpoints and makes the source
// stale; the names the round found dark come with the first.
func TestConfirmFailureKeepsLastState(t *testing.T) {
	f := newFakeServer(t)
	r := startConfirm(t, f, fastRefresh, map[string]int{"a": 0, "b": 3600, "c": 3600})
	f.set(confirmName("b"), mdns.TypeSRV, reply{rcode: mdns.RcodeServerFailure})
	nxdomain(f, "c")
	nxdomain(f, "a")
	r.expect(t, map[string]int{"a": 0, "c": 0}, "a and c emptied, b left as it was")
	if snap := r.status.Snapshot(); !snap.Stale || snap.Failures == 0 {
		t.Errorf("status %+v, want stale after b's failed confirmation", snap)
	}
}

// Rounds start at most once per refresh.min: a darkening sooner than that
// after the last round waits for the next, and is never reported when its
// name lights up again meanwhile.
func TestConfirmRoundRate(t *testing.T) {
	f := newFakeServer(t)
	// Every name is refreshed every 20ms; a round may start once an hour.
	r := startConfirm(t, f, map[string]any{"min": "1h", "max": "1h", "interval": "20ms", "jitter": 0},
		map[string]int{"a": 60, "b": 60})
	nxdomain(f, "a")
	r.expect(t, map[string]int{"a": 0}, "the first round starts at once")
	serve(f, "a", 60, 1)
	r.expect(t, map[string]int{"a": 1}, "an answer needs no round")
	nxdomain(f, "a")
	n := asked(f, "a")
	r.quiet(t, func() bool { return asked(f, "a") >= n+5 })
	serve(f, "a", 60, 1)
	n = asked(f, "a")
	r.quiet(t, func() bool { return asked(f, "a") >= n+5 })
}

// Names flapping between an answer and NXDOMAIN on every refresh (spread
// apart by the jitter) cost at most one round per refresh.min, and every
// darkening that waited is reported once its name stays dark.
func TestConfirmFlappingBounded(t *testing.T) {
	const every = 100 * time.Millisecond
	f := newFakeServer(t)
	ttls := map[string]int{"w": 3600}
	flappers := []string{"f0", "f1", "f2", "f3", "f4", "f5"}
	for _, c := range flappers {
		ttls[c] = 0
	}
	began := time.Now()
	r := startConfirm(t, f, map[string]any{"min": every.String(), "max": "1h", "jitter": 0.9}, ttls)
	for i, c := range flappers {
		rep := answerOf(c, 0, 10+i)
		rep.flap = true
		f.set(confirmName(c), mdns.TypeSRV, rep)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var updates atomic.Int64
	last := make(chan map[string]int, 1)
	go func() {
		state := map[string]int{}
		for {
			select {
			case u := <-r.up:
				updates.Add(1)
				maps.Copy(state, endpointCounts(u))
			case <-ctx.Done():
				last <- state
				return
			}
		}
	}()
	from := asked(f, "f0")
	waitFor(t, func() bool { return asked(f, "f0") >= from+40 })
	rounds := asked(f, "w") - 1
	elapsed := time.Since(began)
	t.Logf("%d rounds and %d updates in %s", rounds, updates.Load(), elapsed.Round(time.Millisecond))
	if limit := 1 + int(elapsed/every); rounds < 1 || rounds > limit {
		t.Errorf("%d confirmation rounds in %s, want 1 to %d (one per refresh.min)", rounds, elapsed, limit)
	}

	for _, c := range flappers {
		nxdomain(f, c)
	}
	base := asked(f, "f0")
	waitFor(t, func() bool { return asked(f, "f0") >= base+10 })
	cancel()
	state := <-last
	for _, c := range flappers {
		if state[c] != 0 {
			t.Errorf("%s last reported with %d endpoints, want 0: a darkening that waited was never reported", c, state[c])
		}
	}
}

// A darkening that comes while a round may not start yet joins the next
// round, which starts once refresh.min has passed though nothing else
// happens. The test feeds merge the names' outcomes itself, so that no
// refresh wakes merge up and only the rounds query the server.
func TestConfirmNextRoundStartsUnprompted(t *testing.T) {
	f := newFakeServer(t)
	var svcs []map[string]any
	for i, c := range []string{"a", "b", "c"} {
		serve(f, c, 3600, i+1)
		svcs = append(svcs, srvService(c, confirmName(c)))
	}
	cfg := baseConfig([]string{f.addr}, svcs...)
	cfg["refresh"] = map[string]any{"min": "300ms", "max": "1h"}
	st := sources.NewStatus("test")
	src, err := New(cfg, sources.Options{Name: "test", Status: st})
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*Source)
	res, err := s.resolver()
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan outcome)
	run := &running{up: make(chan sources.Update), status: st}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.merge(ctx, res, results, run.up) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for i, e := range s.entries {
		at := time.Now()
		r, err := lookup(ctx, res, e, s.family)
		if err != nil {
			t.Fatal(err)
		}
		results <- outcome{i: i, res: r, at: at}
	}
	if u := run.next(t); !u.Full {
		t.Fatalf("first update %+v, want Full", u)
	}

	results <- outcome{i: 0, at: time.Now()}
	run.expect(t, map[string]int{"a": 0}, "a's round starts at once")
	results <- outcome{i: 1, at: time.Now()}
	run.expect(t, map[string]int{"b": 0}, "b's round starts when refresh.min has passed")
	if n := asked(f, "c"); n != 3 {
		t.Errorf("c was asked %d times, want 3 (the start and two rounds)", n)
	}
}
