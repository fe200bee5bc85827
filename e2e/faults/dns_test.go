package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
)

// The DNS source's pacing in these tests: a name answered is refreshed
// after its TTL (60 s in dnstest's zones) clamped to dnsMax, less up to
// 10 % of jitter; a failed lookup is retried after dnsMin, doubling to
// dnsMax. Each lookup makes at most dnsAttempts rounds over the one
// server, each a UDP query and, for a truncated answer, a TCP one.
const (
	dnsMin      = 250 * time.Millisecond
	dnsMax      = 2 * time.Second
	dnsAttempts = 2
	perLookup   = 2 * dnsAttempts
)

// dnsSource is the source entry for names served through proxy.
func dnsSource(proxy string, services ...string) string {
	return fmt.Sprintf(`  - name: dns
    type: dns
    servers: [%s]
    timeout: 1s
    attempts: %d
    family: ipv4
    refresh: {min: %s, max: %s}
    services:
%s`, proxy, dnsAttempts, dnsMin, dnsMax, "      - "+strings.Join(services, "\n      - ")+"\n")
}

// dnsRig is CoreDNS behind a counting proxy and a bridge reading it.
type dnsRig struct {
	zone  *dnstest.Server
	proxy *countproxy.Proxy
	b     *bridge
	w     *watcher
}

func startDNSRig(t *testing.T, records string, services ...string) *dnsRig {
	t.Helper()
	r := &dnsRig{zone: dnstest.Start(t, "example.org.", records)}
	p, err := countproxy.DNS(r.zone.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r.proxy = p
	r.b = startBridge(t, t.TempDir(), dnsSource(p.Addr, services...), bridgeOptions{})
	r.w = startWatcher(t, r.b.xds)
	return r
}

// healthy bounds the queries of n names answered throughout d: each
// refreshed at most every 90 % of dnsMax, with a lookup in flight at each
// end of the window.
func healthy(n int, perLookup int64, d time.Duration) int64 {
	return int64(n) * perLookup * (every(dnsMax*9/10, d) + 1)
}

// failing bounds the queries of n names failing throughout d: the
// lookups backoff allows, and one in flight when the fault began.
func failing(n int, d time.Duration) int64 {
	return int64(n) * perLookup * (paced(dnsMin, dnsMax, d) + 1)
}

const dnsZone = `
_api._tcp 60 IN SRV 0 1 8080 a1
_api._tcp 60 IN SRV 0 1 8080 a2
a1 60 IN A 10.0.1.1
a2 60 IN A 10.0.1.2
a3 60 IN A 10.0.1.3
web 60 IN A 10.0.2.1
db 60 IN A 10.0.3.1
cache 60 IN A 10.0.4.1
`

var dnsServices = []string{
	"{cluster: api, srv: _api._tcp.example.org.}",
	"{cluster: web, host: web.example.org., port: 80}",
	"{cluster: db, host: db.example.org., port: 5432}",
	"{cluster: cache, host: cache.example.org., port: 6379}",
}

// TestDNSFaults breaks the DNS server the way production does, one fault
// after the other on one bridge: killed, answering SERVFAIL for a name,
// refusing every query, answering NXDOMAIN for a name. During each the
// bridge keeps the last good endpoints (no removal reaches the watcher),
// shows the source stale, logs the failure once and paces its lookups by
// its backoff; after each, the zone's new content reaches the watcher.
func TestDNSFaults(t *testing.T) { //nolint:tparallel // its subtests are the steps of one fault, in order; the test runs beside the other faults
	t.Parallel()
	r := startDNSRig(t, dnsZone, dnsServices...)
	b, w, zone := r.b, r.w, r.zone
	w.waitHolds("the zone's endpoints", view{
		"api": {"10.0.1.1:8080", "10.0.1.2:8080"}, "web": {"10.0.2.1:80"},
		"db": {"10.0.3.1:5432"}, "cache": {"10.0.4.1:6379"},
	})
	b.baseline()
	// zone is what the server serves: each fault's recovery adds to it.
	zoneText := dnsZone
	setZone := func(more string) {
		zoneText += more
		zone.SetZone(zoneText)
	}
	stale := func(least uint64) func(manager.SourceStatus) bool {
		return func(s manager.SourceStatus) bool { return s.Stale && s.Failures >= least }
	}
	fresh := func(s manager.SourceStatus) bool { return !s.Stale }

	t.Run("server killed", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		win := b.openWindow(t, r.proxy)
		zone.Stop()
		// Each of the 4 names fails twice: the retry after a backoff.
		s := b.waitStatus("dns", "stale after 8 failed lookups", stale(8))
		if s.LastError == "" {
			t.Errorf("/sources shows no error for the stale source: %+v", s)
		}
		win.checkWork("DNS server killed", func(d time.Duration) int64 { return failing(4, d) })
		win.checkLogs("dns", 1)
		w.release()

		setZone("_api._tcp 60 IN SRV 0 1 8080 a3\n")
		zone.Restart()
		w.wait("api with a3 after the restart", func(v view) bool { return len(v["api"]) == 3 })
		b.waitStatus("dns", "fresh again", fresh)
	})

	t.Run("SERVFAIL for one name", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		win := b.openWindow(t, r.proxy)
		zone.SetServFail("_api._tcp.example.org.")
		b.waitStatus("dns", "stale after 3 failed lookups", stale(3))
		win.checkWork("SERVFAIL for one name", func(d time.Duration) int64 { return failing(1, d) + healthy(3, 1, d) })
		win.checkLogs("dns", 1)
		w.release()

		setZone("web 60 IN A 10.0.2.2\n")
		zone.SetServFail()
		w.wait("web with its second address", func(v view) bool { return len(v["web"]) == 2 })
		b.waitStatus("dns", "fresh again", fresh)
	})

	t.Run("REFUSED", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		w.guard()
		win := b.openWindow(t, r.proxy)
		zone.SetRefused(true)
		b.waitStatus("dns", "stale after 8 failed lookups", stale(8))
		win.checkWork("every query REFUSED", func(d time.Duration) int64 { return failing(4, d) })
		win.checkLogs("dns", 1)
		w.release()

		setZone("db 60 IN A 10.0.3.2\n")
		zone.SetRefused(false)
		w.wait("db with its second address", func(v view) bool { return len(v["db"]) == 2 })
		b.waitStatus("dns", "fresh again", fresh)
	})

	t.Run("NXDOMAIN for one name", func(t *testing.T) {
		defer b.in(t)()
		defer w.in(t)()
		// An authoritative NXDOMAIN is the registry's answer, not a
		// failure: cache goes dark once one confirmation round has found
		// the other names still answered, and the rest stays.
		w.guard("api", "web", "db")
		win := b.openWindow(t, r.proxy)
		zone.SetZone(strings.Replace(zoneText, "cache 60 IN A 10.0.4.1\n", "", 1))
		w.wait("cache without endpoints", func(v view) bool { return len(v["cache"]) == 0 })
		// The name's own lookups, its neighbours' refreshes, and one
		// confirmation round over the names that kept endpoints.
		win.checkWork("NXDOMAIN for one name", func(d time.Duration) int64 {
			return healthy(4, perLookup, d) + 3*perLookup*every(dnsMin, d)
		})
		win.checkLogs("dns", 0)
		if s := b.status("dns"); s.Stale {
			t.Errorf("an NXDOMAIN answer made the source stale: %+v", s)
		}
		w.release()

		zone.SetZone(zoneText)
		w.wait("cache back", func(v view) bool { return len(v["cache"]) == 1 })
	})
	b.settled()
}

// TestDNSLargeAndPartialAnswers: an SRV name with 500 targets, whose
// answer only TCP can carry, is served whole, each refresh costing a
// bounded number of queries; a target without an address is dropped and
// counted while the name's other targets are served.
func TestDNSLargeAndPartialAnswers(t *testing.T) {
	t.Parallel()
	var zone strings.Builder
	for i := range 500 {
		fmt.Fprintf(&zone, "_big._tcp 60 IN SRV 0 1 9000 t%03d\nt%03d 60 IN A 10.1.%d.%d\n", i, i, i/250, i%250+1)
	}
	zone.WriteString("_part._tcp 60 IN SRV 0 1 7000 p1\n_part._tcp 60 IN SRV 0 1 7000 nowhere\np1 60 IN A 10.2.0.1\n")
	r := startDNSRig(t, zone.String(),
		"{cluster: big, srv: _big._tcp.example.org.}",
		"{cluster: part, srv: _part._tcp.example.org.}")
	b, w := r.b, r.w
	win := b.openWindow(t, r.proxy)
	w.wait("big with 500 endpoints and part with p1", func(v view) bool {
		return len(v["big"]) == 500 && len(v["part"]) == 1 && v["part"][0] == "10.2.0.1:7000"
	})
	s := b.waitStatus("dns", "the target without an address counted", func(s manager.SourceStatus) bool { return s.Dropped >= 1 })
	if s.Stale {
		t.Errorf("a target without an address made the source stale: %+v", s)
	}
	b.baseline()
	// Refreshes of both names: big's answer over UDP (truncated) then TCP;
	// part's, and the queries of its target without an address.
	w.guard()
	bridgetest.Eventually(t, patience, "a few refreshes", func() bool {
		c, _ := win.work()
		return c.Requests >= 8
	})
	win.checkWork("500 SRV targets and a target without an address", func(d time.Duration) int64 {
		return healthy(1, perLookup, d) + healthy(1, 3*perLookup, d)
	})
	win.checkLogs("dns", 1)
	w.release()
	b.settled()
}
