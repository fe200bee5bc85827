package dnstest

import (
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func answers(n int) func(*mdns.Msg) bool {
	return func(m *mdns.Msg) bool { return m.Rcode == mdns.RcodeSuccess && len(m.Answer) == n }
}

// patience bounds each wait: a failure detector that a loaded machine must
// never reach, not a measurement.
const patience = 30 * time.Second

func TestServer(t *testing.T) {
	s := Start(t, "example.org", "_api._tcp 5 IN SRV 0 1 80 a\na 5 IN A 127.0.0.10\n")
	r, err := s.Query("_api._tcp.example.org", mdns.TypeSRV)
	if err != nil || r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 || !r.Authoritative {
		t.Fatalf("SRV query: %v %v", r, err)
	}

	// A zone edit is served without a restart: the file plugin reloads
	// the zone when its serial changes (how soon is logged, not asserted).
	written := time.Now()
	s.SetZone("_api._tcp 5 IN SRV 0 1 80 a\n_api._tcp 5 IN SRV 0 1 80 b\na 5 IN A 127.0.0.10\nb 5 IN A 127.0.0.11\n")
	served := s.WaitServes("_api._tcp.example.org", mdns.TypeSRV, answers(2), patience)
	t.Logf("zone edit served after %s (reload interval %s)", served.Sub(written), ReloadInterval)

	// Stopped, the port does not answer; restarted, it does, same zone.
	s.Stop()
	if _, err := s.Query("_api._tcp.example.org", mdns.TypeSRV); err == nil {
		t.Fatal("stopped server answered")
	}
	s.Restart()
	s.WaitServes("_api._tcp.example.org", mdns.TypeSRV, answers(2), patience)

	// SERVFAIL for one name, the rest of the zone unaffected.
	s.SetServFail("_api._tcp.example.org")
	if r, err := s.Query("_api._tcp.example.org", mdns.TypeSRV); err != nil || r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("want SERVFAIL, got %v %v", r, err)
	}
	s.WaitServes("a.example.org", mdns.TypeA, answers(1), patience)
	s.SetServFail()
	s.WaitServes("_api._tcp.example.org", mdns.TypeSRV, answers(2), patience)
	if r, _ := s.Query("nope.example.org", mdns.TypeA); r == nil || r.Rcode != mdns.RcodeNameError {
		t.Fatalf("want NXDOMAIN, got %v", r)
	}
}
