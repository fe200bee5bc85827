package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// The removal guard with its default settings, against real registries:
// ordinary removals reach the clients with no hold at all, an emptied
// source is held, shown in /sources and applied on confirmation.

// guardBridge writes a bridge.yaml with one source entry (entry, indented
// as a list item of sources) on free ports, without any guard setting.
func guardBridge(t *testing.T, dir, entry string) (cfg, xdsAddr, adminAddr string) {
	t.Helper()
	xdsAddr, adminAddr = freeport.Addr(t), freeport.Addr(t)
	cfg = filepath.Join(dir, "bridge.yaml")
	writeFile(t, cfg, fmt.Sprintf("xds: {listen: %s}\nadmin: {listen: %s}\nlog: {level: info}\nsources:\n%s", xdsAddr, adminAddr, entry))
	return cfg, xdsAddr, adminAddr
}

// noHold fails if the source's guard ever held a change.
func noHold(t *testing.T, adminAddr, name, step string) {
	t.Helper()
	if s := bridgetest.SourceStatus(t, adminAddr, name); s.GuardHolds != 0 || s.Guard != nil {
		t.Errorf("%s: the guard held (guard_holds %d, guard %+v), want no hold", step, s.GuardHolds, s.Guard)
	}
}

// waitHold waits until /sources shows a hold of the source whose reason
// contains reason, and returns it.
func waitHold(t *testing.T, adminAddr, name, reason string) manager.GuardSnapshot {
	t.Helper()
	var g *manager.GuardSnapshot
	bridgetest.Eventually(t, patience, "a hold of "+name+" in /sources", func() bool {
		g = bridgetest.SourceStatus(t, adminAddr, name).Guard
		return g != nil
	})
	if !strings.Contains(g.Reason, reason) || g.Until.Before(g.Since) {
		t.Errorf("hold %+v, want the reason to contain %q", g, reason)
	}
	return *g
}

// confirmHold posts the operator's confirmation for the source.
func confirmHold(t *testing.T, adminAddr, name string) {
	t.Helper()
	bridgetest.ConfirmRemovals(t, adminAddr, name)
	if s := bridgetest.SourceStatus(t, adminAddr, name); s.Guard != nil || s.GuardHolds != 1 {
		t.Errorf("after the confirmation: guard %+v, guard_holds %d; want no hold, one in all", s.Guard, s.GuardHolds)
	}
}

func TestGuardDNSDefaults(t *testing.T) {
	const hosts = "a 2 IN A 127.0.0.11\nb 2 IN A 127.0.0.12\nc 2 IN A 127.0.0.13\nd 2 IN A 127.0.0.14\ne 5 IN A 127.0.0.15\n"
	const (
		api  = "_api._tcp 2 IN SRV 10 10 8080 a\n_api._tcp 2 IN SRV 10 10 8081 b\n_api._tcp 2 IN SRV 10 10 8082 c\n"
		api2 = "_api._tcp 2 IN SRV 10 10 8080 a\n_api._tcp 2 IN SRV 10 10 8082 c\n"
		web  = "_web._tcp 2 IN SRV 10 10 9090 d\n"
		db   = "_db._tcp 5 IN SRV 10 10 5432 e\n" // a longer TTL than api's
	)
	s := dnstest.Start(t, "example.org", hosts+api+web+db)
	// refresh.min below the TTL, so that the TTL paces the refreshes.
	cfg, xdsAddr, adminAddr := guardBridge(t, t.TempDir(), fmt.Sprintf(`  - name: dns
    type: dns
    servers: [%q]
    refresh: {min: 1s}
    services:
      - {cluster: api, srv: _api._tcp.example.org}
      - {cluster: web, srv: _web._tcp.example.org}
      - {cluster: db, srv: _db._tcp.example.org}
`, s.Addr))
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	cl := startClient(t, xdsAddr, envoysim.Options{Node: "dns", Delta: true})
	n := func(st envoysim.State, name string) int { return len(endpoints(st.Assignments[name])) }
	waitClient(t, cl, "every service", func(st envoysim.State) bool { return n(st, "api") == 3 && n(st, "web") == 1 && n(st, "db") == 1 })

	// One name answers NXDOMAIN: its cluster stays, empty.
	written := time.Now()
	s.SetZone(hosts + api + db)
	got := waitClient(t, cl, "web emptied", func(st envoysim.State) bool {
		return st.Clusters["web"] != nil && st.Assignments["web"] != nil && n(st, "web") == 0
	})
	t.Logf("one name's NXDOMAIN reached the client %v after the zone write (TTL 2s)", got.Sub(written).Round(time.Millisecond))
	noHold(t, adminAddr, "dns", "one name NXDOMAIN")

	// One SRV target of three dropped.
	written = time.Now()
	s.SetZone(hosts + api2 + db)
	got = waitClient(t, cl, "api with two targets", func(st envoysim.State) bool { return n(st, "api") == 2 })
	t.Logf("a dropped SRV target reached the client %v after the zone write", got.Sub(written).Round(time.Millisecond))
	noHold(t, adminAddr, "dns", "one SRV target dropped")
	p.waitLog(patience, "source changes applied", "source=dns", "~api")

	// Every name answers NXDOMAIN. Their TTLs differ, but the first to
	// expire brings the other with it, so the source empties in one change,
	// which is held before the client lost anything: both services' three
	// endpoints are held and still served.
	s.SetZone(hosts)
	if g := waitHold(t, adminAddr, "dns", "source emptied"); g.HeldEndpoints != 3 {
		t.Errorf("hold %+v, want api's 2 endpoints and db's 1 held", g)
	}
	if st := cl.State(); n(st, "api") != 2 || n(st, "db") != 1 {
		t.Errorf("during the hold the client has %d endpoints of api and %d of db, want 2 and 1:\n%s", n(st, "api"), n(st, "db"), st.Summary())
	}
	p.waitLog(patience, "level=WARN", "source=dns", "source emptied", "POST /guard/confirm?source=dns")
	confirmHold(t, adminAddr, "dns")
	waitClient(t, cl, "every cluster empty", func(st envoysim.State) bool {
		return len(st.Clusters) == 3 && n(st, "api")+n(st, "web")+n(st, "db") == 0
	})
	p.waitLog(patience, "level=INFO", "removal hold over", "source=dns", "confirmed by an operator")
}

func TestGuardFileDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg, xdsAddr, adminAddr := writeConfig(t, dir)
	services := filepath.Join(dir, "services.yaml")
	four := []svc{
		{Name: "web", EPs: []ep{{Addr: "127.0.0.1", Port: 8081}, {Addr: "127.0.0.1", Port: 8082}}},
		{Name: "api", EPs: []ep{{Addr: "127.0.0.1", Port: 9091}}},
		{Name: "payments", EPs: []ep{{Addr: "127.0.0.1", Port: 9092}}},
		{Name: "search", EPs: []ep{{Addr: "::1", Port: 9200}}},
	}
	writeFile(t, services, render(four))
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	cl := startClient(t, xdsAddr, envoysim.Options{Node: "file", Delta: true})
	waitState(t, cl, "file", four)

	// Three of four services deleted from the file: an edit, applied at
	// once and logged at INFO.
	written := time.Now()
	writeFile(t, services, render(four[:1]))
	waitState(t, cl, "file", four[:1])
	t.Logf("deleting three of four services reached the client in %v", time.Since(written).Round(time.Millisecond))
	noHold(t, adminAddr, "static", "three services deleted")
	p.waitLog(patience, "level=INFO", "source changes applied", "source=static", "removed=3")

	// The file truncated to no services: held, visible, confirmable.
	writeFile(t, services, render(four))
	waitState(t, cl, "file", four)
	writeFile(t, services, "services: []\n")
	g := waitHold(t, adminAddr, "static", "source emptied")
	if g.HeldServices != 4 {
		t.Errorf("hold %+v, want the 4 services held", g)
	}
	if d := diff(cl.State(), four); d != "" {
		t.Errorf("the client lost services during the hold: %s", d)
	}
	p.waitLog(patience, "level=WARN", "source=static", "source emptied", "POST /guard/confirm?source=static")
	confirmHold(t, adminAddr, "static")
	waitState(t, cl, "file", nil)
}

func TestGuardHTTPEmptied(t *testing.T) {
	doc := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"services": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name": "svc%04d", "endpoints": [{"address": "10.%d.%d.1", "port": 8080}]}`, i, i/250, i%250)
		}
		b.WriteString("]}")
		return []byte(b.String())
	}
	var body atomic.Pointer[[]byte]
	set := func(b []byte) { body.Store(&b) }
	set(doc(1000))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*body.Load())
	}))
	t.Cleanup(srv.Close)
	cfg, xdsAddr, adminAddr := guardBridge(t, t.TempDir(), fmt.Sprintf("  - {name: cmdb, type: http, url: %q, interval: 200ms}\n", srv.URL))
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	cl := startClient(t, xdsAddr, envoysim.Options{Node: "http", Delta: true})
	clusters := func(want int) func(envoysim.State) bool {
		return func(st envoysim.State) bool { return len(st.Clusters) == want && len(st.Assignments) == want }
	}
	waitClient(t, cl, "1,000 clusters", clusters(1000))

	// Ten services gone: applied at once.
	written := time.Now()
	set(doc(990))
	got := waitClient(t, cl, "990 clusters", clusters(990))
	t.Logf("ten removals of 1,000 reached the client in %v", got.Sub(written).Round(time.Millisecond))
	noHold(t, adminAddr, "cmdb", "ten services removed")

	// The registry answers an empty list: held, visible, confirmable.
	set([]byte(`{"services": []}`))
	if g := waitHold(t, adminAddr, "cmdb", "source emptied"); g.HeldServices != 990 {
		t.Errorf("hold %+v, want the 990 services held", g)
	}
	if st := cl.State(); len(st.Clusters) != 990 {
		t.Errorf("the client has %d clusters during the hold, want 990", len(st.Clusters))
	}
	p.waitLog(patience, "level=WARN", "source=cmdb", "source emptied", "POST /guard/confirm?source=cmdb")
	confirmHold(t, adminAddr, "cmdb")
	waitClient(t, cl, "no cluster", clusters(0))
}
