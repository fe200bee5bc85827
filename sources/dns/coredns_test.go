package dns

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
)

// Integration tests of the DNS source against a real
// authoritative server (CoreDNS 1.15.0, file plugin) on loopback.

const (
	apiName = "_api._tcp.example.org."
	ttl     = 2 * time.Second // the TTL of the zone's records below
)

// stamped is an update and when the test received it.
type stamped struct {
	sources.Update
	at time.Time
}

// watch runs a source with cfg and forwards its updates, stamped, into a
// buffered channel, so that the test can wait on the DNS server while the
// source goes on publishing.
func watch(t *testing.T, cfg map[string]any) (<-chan stamped, *sources.Status) {
	t.Helper()
	st := sources.NewStatus("coredns")
	src, err := New(cfg, sources.Options{Name: "coredns", Status: st})
	if err != nil {
		t.Fatal(err)
	}
	up := make(chan sources.Update)
	out := make(chan stamped, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, up) }()
	fwd := make(chan struct{})
	go func() {
		defer close(fwd)
		for {
			select {
			case u := <-up:
				out <- stamped{u, time.Now()}
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-fwd
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	})
	return out, st
}

func nextUpdate(t *testing.T, ch <-chan stamped) stamped {
	t.Helper()
	return receive(t, ch, func() string { return "update" })
}

func integrationConfig(s *dnstest.Server, services ...map[string]any) map[string]any {
	cfg := baseConfig([]string{s.Addr}, services...)
	cfg["refresh"] = map[string]any{"min": "100ms", "max": "30s", "jitter": 0.1}
	return cfg
}

const weightedZone = `
_api._tcp 2 IN SRV 10 0 8080 a
_api._tcp 2 IN SRV 10 10 8081 b
_api._tcp 2 IN SRV 10 60 8082 c
_api._tcp 2 IN SRV 20 10 9090 d
a 2 IN A 127.0.0.11
a 2 IN AAAA fd00::11
b 2 IN A 127.0.0.12
b 2 IN AAAA fd00::12
c 2 IN A 127.0.0.13
c 2 IN AAAA fd00::13
d 2 IN A 127.0.0.14
d 2 IN AAAA fd00::14
`

// Priorities 10/20 become 0/1, weights 0/10/60 become
// 1/10/60 (the RFC 2782 shares), one endpoint per target address.
func TestCoreDNSPrioritiesAndWeights(t *testing.T) {
	s := dnstest.Start(t, "example.org", weightedZone)
	ups, st := watch(t, integrationConfig(s, srvService("api", apiName)))
	u := nextUpdate(t, ups)
	want := []sources.Endpoint{
		ep("127.0.0.11", 8080, 1, 0), ep("127.0.0.12", 8081, 10, 0), ep("127.0.0.13", 8082, 60, 0),
		ep("fd00::11", 8080, 1, 0), ep("fd00::12", 8081, 10, 0), ep("fd00::13", 8082, 60, 0),
		ep("127.0.0.14", 9090, 10, 1), ep("fd00::14", 9090, 10, 1),
	}
	wantSvc := sources.Service{Name: "api", Endpoints: want}
	wantSvc.Sort()
	if !u.Full || len(u.Services) != 1 || !u.Services[0].Equal(wantSvc) {
		t.Fatalf("update %+v\nwant Full with %v", u.Update, wantSvc.Endpoints)
	}
	if snap := st.Snapshot(); !snap.Synced || snap.Stale || snap.Dropped != 0 {
		t.Errorf("status %+v", snap)
	}
}

// Adding a target, changing a weight and removing a record each reach the
// source's output through the refresh that the records' TTL schedules:
// refresh.max is an hour, far beyond the test's patience, so no other
// refresh could deliver them. TestRefreshSchedule asserts the delays
// themselves; here the lag is only logged.
func TestCoreDNSDynamicUpdates(t *testing.T) {
	zone := "_api._tcp 2 IN SRV 0 10 80 a\na 2 IN A 127.0.0.11\nb 2 IN A 127.0.0.12\n"
	s := dnstest.Start(t, "example.org", zone)
	cfg := integrationConfig(s, srvService("api", apiName))
	cfg["refresh"] = map[string]any{"min": "100ms", "max": "1h", "jitter": 0.1}
	ups, _ := watch(t, cfg)
	nextUpdate(t, ups)

	steps := []struct {
		name string
		zone string
		want []sources.Endpoint
	}{
		{"add a target", zone + "_api._tcp 2 IN SRV 0 10 81 b\n",
			[]sources.Endpoint{ep("127.0.0.11", 80, 10, 0), ep("127.0.0.12", 81, 10, 0)}},
		{"change a weight", zone + "_api._tcp 2 IN SRV 0 30 81 b\n",
			[]sources.Endpoint{ep("127.0.0.11", 80, 10, 0), ep("127.0.0.12", 81, 30, 0)}},
		{"remove a record", "_api._tcp 2 IN SRV 0 30 81 b\na 2 IN A 127.0.0.11\nb 2 IN A 127.0.0.12\n",
			[]sources.Endpoint{ep("127.0.0.12", 81, 30, 0)}},
	}
	for _, step := range steps {
		written := time.Now()
		s.SetZone(step.zone)
		served := s.WaitServes(apiName, mdns.TypeSRV, func(m *mdns.Msg) bool {
			return srvCount(m) == len(step.want) && srvWeightSum(m) == weightSum(step.want)
		}, patience)
		u := nextUpdate(t, ups)
		if u.Full || len(u.Services) != 1 || !slices.EqualFunc(u.Services[0].Endpoints, step.want, sources.Endpoint.Equal) {
			t.Fatalf("%s: update %+v, want %v", step.name, u.Update, step.want)
		}
		t.Logf("%s: served %s after the zone write, in the source's output %s after being served (TTL %s)",
			step.name, served.Sub(written).Round(time.Millisecond), u.at.Sub(served).Round(time.Millisecond), ttl)
	}
}

// A stopped server publishes nothing (the last endpoints
// stay) and makes the source stale; restarted, updates resume.
func TestCoreDNSOutage(t *testing.T) {
	zone := "_api._tcp 2 IN SRV 0 10 80 a\na 2 IN A 127.0.0.11\n"
	s := dnstest.Start(t, "example.org", zone)
	ups, st := watch(t, integrationConfig(s, srvService("api", apiName)))
	nextUpdate(t, ups)

	s.Stop()
	waitFor(t, func() bool { return st.Snapshot().Failures >= 2 })
	snap := st.Snapshot()
	if !snap.Stale || !snap.Synced || snap.LastError == "" || snap.FailingFrom.IsZero() {
		t.Fatalf("status during outage %+v, want synced and stale", snap)
	}
	select {
	case u := <-ups:
		t.Fatalf("update during outage: %+v", u.Update)
	default:
	}

	s.SetZone(zone + "_api._tcp 2 IN SRV 0 10 81 b\nb 2 IN A 127.0.0.12\n")
	s.Restart()
	u := nextUpdate(t, ups)
	if len(u.Services) != 1 || len(u.Services[0].Endpoints) != 2 {
		t.Fatalf("update after restart %+v, want 2 endpoints", u.Update)
	}
	waitFor(t, func() bool { return !st.Snapshot().Stale })
	t.Logf("outage: stale from the first failed lookup to %s later, %d failed lookups",
		u.at.Sub(snap.FailingFrom).Round(time.Millisecond), st.Snapshot().Failures)
}

// SERVFAIL keeps the endpoints, NXDOMAIN empties the cluster.
func TestCoreDNSServFailAndNXDomain(t *testing.T) {
	zone := "_api._tcp 2 IN SRV 0 10 80 a\na 2 IN A 127.0.0.11\n"
	s := dnstest.Start(t, "example.org", zone)
	ups, st := watch(t, integrationConfig(s, srvService("api", apiName)))
	nextUpdate(t, ups)

	s.SetServFail(apiName)
	failures := st.Snapshot().Failures
	waitFor(t, func() bool { return st.Snapshot().Failures >= failures+2 })
	if snap := st.Snapshot(); !snap.Stale {
		t.Fatalf("status after SERVFAIL %+v, want stale", snap)
	}
	select {
	case u := <-ups:
		t.Fatalf("SERVFAIL published %+v", u.Update)
	default:
	}

	s.SetZone("a 2 IN A 127.0.0.11\n")
	s.SetServFail()
	s.WaitServes(apiName, mdns.TypeSRV, func(m *mdns.Msg) bool { return m.Rcode == mdns.RcodeNameError }, patience)
	u := nextUpdate(t, ups)
	if len(u.Services) != 1 || u.Services[0].Name != "api" || len(u.Services[0].Endpoints) != 0 {
		t.Fatalf("update after NXDOMAIN %+v, want api with no endpoints", u.Update)
	}
	waitFor(t, func() bool { return !st.Snapshot().Stale })
}

// A host entry with port 8080 yields one endpoint per
// A/AAAA record.
func TestCoreDNSHostEntry(t *testing.T) {
	s := dnstest.Start(t, "example.org", "web 2 IN A 127.0.0.21\nweb 2 IN A 127.0.0.22\nweb 2 IN AAAA fd00::21\n")
	ups, _ := watch(t, integrationConfig(s, map[string]any{"cluster": "web", "host": "web.example.org", "port": 8080}))
	u := nextUpdate(t, ups)
	want := []sources.Endpoint{ep("127.0.0.21", 8080, 1, 0), ep("127.0.0.22", 8080, 1, 0), ep("fd00::21", 8080, 1, 0)}
	if len(u.Services) != 1 || u.Services[0].Name != "web" || !slices.EqualFunc(u.Services[0].Endpoints, want, sources.Endpoint.Equal) {
		t.Fatalf("update %+v, want %v", u.Update, want)
	}
}

func srvCount(m *mdns.Msg) int {
	n := 0
	for _, rr := range m.Answer {
		if _, ok := rr.(*mdns.SRV); ok {
			n++
		}
	}
	return n
}

func srvWeightSum(m *mdns.Msg) uint32 {
	var sum uint32
	for _, rr := range m.Answer {
		if srv, ok := rr.(*mdns.SRV); ok {
			sum += uint32(srv.Weight)
		}
	}
	return sum
}

func weightSum(eps []sources.Endpoint) uint32 {
	var sum uint32
	for _, e := range eps {
		sum += e.Weight
	}
	return sum
}
