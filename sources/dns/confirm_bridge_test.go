package dns_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// The whole bridge with its default guard against CoreDNS, whose names
// have TTLs from 2s to 6s: one name answering NXDOMAIN reaches the client
// with no hold; every name answering NXDOMAIN is held as one change, and
// the client keeps every service's endpoints until an operator confirms.
func TestBridgeDNSLostZoneHeld(t *testing.T) {
	const live = "_api._tcp 2 IN SRV 10 10 8080 a\na 2 IN A 127.0.0.11\n" +
		"_web._tcp 3 IN SRV 10 10 8081 w\nw 3 IN A 127.0.0.12\n" +
		"cache 4 IN A 127.0.0.13\n" +
		"_db._tcp 6 IN SRV 10 10 5432 d\nd 6 IN A 127.0.0.14\n"
	s := dnstest.Start(t, "example.org", live+"old 2 IN A 127.0.0.15\n")
	in := bridgetest.Start(t, fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - name: dns
    type: dns
    servers: [%q]
    refresh: {min: 1s}
    services:
      - {cluster: api, srv: _api._tcp.example.org}
      - {cluster: web, srv: _web._tcp.example.org}
      - {cluster: cache, host: cache.example.org, port: 6379}
      - {cluster: db, srv: _db._tcp.example.org}
      - {cluster: old, host: old.example.org, port: 80}
`, s.Addr))
	admin := in.AdminAddr().String()
	kept := []string{"api", "web", "cache", "db"}

	// From armed on, the client must never lack an endpoint of kept.
	var (
		armed atomic.Bool
		mu    sync.Mutex
		lost  []string
	)
	ctx := t.Context()
	client, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String(), Delta: true,
		OnResponse: func(c *envoysim.Client, r envoysim.Received) {
			if !armed.Load() {
				return
			}
			st := c.State()
			for _, name := range kept {
				if len(lbEndpoints(st.Assignments[name])) == 0 {
					mu.Lock()
					lost = append(lost, fmt.Sprintf("%s (%s version %s)", name, r.TypeURL, r.Version))
					mu.Unlock()
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	wait := func(what string, cond func(map[string]int) bool) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := client.WaitFor(wctx, func(st envoysim.State) bool {
			n := map[string]int{}
			for name, cla := range st.Assignments {
				n[name] = len(lbEndpoints(cla))
			}
			return len(n) == 5 && cond(n)
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	wait("every service", func(n map[string]int) bool {
		return n["api"] == 1 && n["web"] == 1 && n["cache"] == 1 && n["db"] == 1 && n["old"] == 1
	})

	// One name of five answers NXDOMAIN: applied, no hold.
	s.SetZone(live)
	wait("old emptied", func(n map[string]int) bool { return n["old"] == 0 })
	if st := bridgetest.SourceStatus(t, admin, "dns"); st.GuardHolds != 0 || st.Guard != nil {
		t.Errorf("one name NXDOMAIN: guard_holds %d, guard %+v; want no hold", st.GuardHolds, st.Guard)
	}

	// Every name answers NXDOMAIN: the first to expire brings the others
	// with it, the source empties, and the guard holds all four.
	armed.Store(true)
	s.SetZone("")
	var g *manager.GuardSnapshot
	bridgetest.Eventually(t, 30*time.Second, "a hold of dns", func() bool {
		g = bridgetest.SourceStatus(t, admin, "dns").Guard
		return g != nil
	})
	if !strings.Contains(g.Reason, "source emptied") || g.HeldEndpoints != len(kept) {
		t.Errorf("hold %+v, want the source emptied with the %d endpoints of %v held", g, len(kept), kept)
	}
	for _, name := range kept {
		if st := client.State(); len(lbEndpoints(st.Assignments[name])) != 1 {
			t.Errorf("during the hold the client has %s with %v, want its endpoint", name, lbEndpoints(st.Assignments[name]))
		}
	}
	armed.Store(false)
	mu.Lock()
	if len(lost) > 0 {
		t.Errorf("the client lost services before the confirmation: %v", lost)
	}
	mu.Unlock()

	bridgetest.ConfirmRemovals(t, admin, "dns")
	wait("every service emptied", func(n map[string]int) bool {
		return n["api"]+n["web"]+n["cache"]+n["db"]+n["old"] == 0
	})
}
