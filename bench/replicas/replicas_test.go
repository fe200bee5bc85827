package replicas

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
)

// TestLedgerCounts feeds the ledger a fleet's receipts by hand: arrivals,
// a change superseded by a later one of the same service, a resend of
// what a client holds, a revert and its re-application, a change the
// registry refused.
func TestLedgerCounts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := newLedger(2, 3, 10, t0.Add(-time.Second))
	for c := range 2 {
		for svc := range 3 {
			l.assignment(c, svc, 0, false, t0)
			l.cluster(c, false)
		}
	}
	l.track()
	k1 := l.make(1, at(0))
	k2 := l.make(1, at(1000))
	k3 := l.make(2, at(2000))
	k4 := l.make(0, at(2500))
	l.fail(k4)
	if k1 != 1 || k2 != 2 || k3 != 3 {
		t.Fatalf("changes numbered %d %d %d, want 1 2 3", k1, k2, k3)
	}
	if got := l.lastChanged(1); !got.Equal(at(1000)) {
		t.Errorf("service 1 last changed at %v, want %v", got, at(1000))
	}

	l.assignment(0, 1, k1, false, at(100))
	l.assignment(0, 1, k2, false, at(1200))
	l.assignment(0, 2, k3, false, at(2300))
	// Client 1 misses k1 (k2 brings it), moves, and its new replica
	// first resends k3, then sends k1's state (a revert), then k2 again.
	l.assignment(1, 1, k2, false, at(1500))
	l.assignment(1, 2, k3, true, at(2400))
	l.assignment(1, 2, k3, true, at(2450))
	l.assignment(1, 1, k1, true, at(2500))
	l.assignment(1, 1, k2, true, at(2600))

	if d, s, ok := l.arrival(0, k1); !ok || s || !d.Equal(at(100)) {
		t.Errorf("client 0 change 1: %v superseded=%v ok=%v, want %v", d, s, ok, at(100))
	}
	if d, s, ok := l.arrival(1, k1); !ok || !s || !d.Equal(at(1500)) {
		t.Errorf("client 1 change 1: %v superseded=%v ok=%v, want superseded at %v", d, s, ok, at(1500))
	}
	if n := l.superseded(); n != 1 {
		t.Errorf("superseded = %d, want 1", n)
	}
	g := &l.got[1]
	for name, c := range map[string]struct{ got, want int64 }{
		"fresh first":     {g.fresh[0].Load(), 3 + 1},
		"fresh later":     {g.fresh[1].Load(), 1},
		"again later":     {g.again[1].Load(), 1},
		"reverts later":   {g.reverts[1].Load(), 1},
		"reapplied later": {g.reapplied[1].Load(), 1},
		"assignments":     {g.assignments[0].Load() + g.assignments[1].Load(), 3 + 1 + 4},
		"clusters":        {g.clusters[0].Load(), 3},
	} {
		if c.got != c.want {
			t.Errorf("client 1 %s = %d, want %d", name, c.got, c.want)
		}
	}

	pairs, per, missing := l.latencies(at(0), at(3000))
	if len(pairs) != 6 || len(per) != 3 || missing != 0 {
		t.Fatalf("latencies: %d pairs, %d changes, %d missing; want 6, 3, 0 (the refused change owes nothing)", len(pairs), len(per), missing)
	}
	if want := []time.Duration{1500 * time.Millisecond, 500 * time.Millisecond, 400 * time.Millisecond}; per[0] != want[0] || per[1] != want[1] || per[2] != want[2] {
		t.Errorf("slowest client per change = %v, want %v", per, want)
	}

	// Client 1 lost its stream at 1.8 s and began to reconnect at 2.2 s:
	// it lacked k3 (made at 2 s), which arrived at 2.4 s.
	cur, lacked, ok := l.current(1, at(1800), at(2200))
	if !ok || lacked != 1 || !cur.Equal(at(2400)) {
		t.Errorf("current = %v, lacked %d, ok %v; want %v, 1, true", cur, lacked, ok, at(2400))
	}
	if _, _, ok := l.current(0, at(2100), at(2200)); !ok {
		t.Error("client 0 holds every change made before it reconnected, yet is not current")
	}
	if svc := l.holdsLatest(1); svc != -1 {
		t.Errorf("client 1 is not at the latest change of service %d", svc)
	}
	l.assignment(0, 1, k1, true, at(2700))
	if svc := l.holdsLatest(0); svc != 1 {
		t.Errorf("after a revert holdsLatest(0) = %d, want service 1", svc)
	}
}

// TestReplicaLag: per change, the first arrival at each replica's
// clients; the lag is the latest of those less the earliest.
func TestReplicaLag(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := newLedger(4, 2, 4, t0.Add(-time.Second))
	l.track()
	k := l.make(0, at(0))
	for c, ms := range []int{120, 100, 130, 170} {
		l.assignment(c, 0, k, false, at(ms))
	}
	l.make(1, at(10)) // reached no client of replica 1: no lag for it
	l.assignment(0, 1, 2, false, at(50))
	got := l.replicaLag([]int{0, 0, 1, -1}, 2, at(0), at(100))
	if len(got) != 1 || got[0] != 30*time.Millisecond {
		t.Errorf("lags %v, want [30ms] (replica 0 first at 100 ms, replica 1 at 130 ms; client 3 on no known replica)", got)
	}
}

// TestLedgerMissing: a change no client received is missing for each,
// and keeps a client from being current.
func TestLedgerMissing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := newLedger(2, 2, 4, t0.Add(-time.Second))
	l.track()
	l.make(0, t0)
	if _, _, miss := l.latencies(t0, t0.Add(time.Second)); miss != 2 {
		t.Errorf("missing = %d, want 2", miss)
	}
	if _, _, ok := l.current(0, t0.Add(10*time.Millisecond), t0.Add(20*time.Millisecond)); ok {
		t.Error("a client lacking a change made before it reconnected is current")
	}
	second, third, fourth := l.make(1, t0), l.make(1, t0), l.make(0, t0)
	if second == 0 || third == 0 || fourth != 0 {
		t.Error("a ledger of capacity 4 holds changes 1 to 3 and refuses the fourth")
	}
}

func TestAssignmentMarker(t *testing.T) {
	ep := func(port uint32) *endpointv3.LbEndpoint {
		return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}
	}
	cla := func(name string, ports ...uint32) []byte {
		m := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
		for _, p := range ports {
			m.Endpoints[0].LbEndpoints = append(m.Endpoints[0].LbEndpoints, ep(p))
		}
		b, _ := proto.Marshal(m)
		return b
	}
	if svc, k, n, err := assignmentMarker(cla("svc-00007", 8001, markerBase+42, 8002), 10); err != nil || svc != 7 || k != 42 || n != 3 {
		t.Errorf("got service %d change %d, %d endpoints (%v), want 7, 42, 3", svc, k, n, err)
	}
	if svc, k, n, err := assignmentMarker(cla("svc-00003", 8000, 8001), 10); err != nil || svc != 3 || k != 0 || n != 2 {
		t.Errorf("unchanged: got service %d change %d, %d endpoints (%v), want 3, 0, 2", svc, k, n, err)
	}
	if _, _, n, err := assignmentMarker(cla("svc-00004"), 10); err != nil || n != 0 {
		t.Errorf("empty assignment: %d endpoints (%v), want 0", n, err)
	}
	for _, name := range []string{"svc-00010", "other", "svc-x"} {
		if _, _, _, err := assignmentMarker(cla(name, 8000), 10); err == nil {
			t.Errorf("%q read as a service of 10", name)
		}
	}
}

// TestReplicasReport: a run whose server reads could not be counted says
// so instead of reporting a ratio of zeros, and an endpoint a client saw
// go missing, or a version go backwards, fails its target.
func TestReplicasReport(t *testing.T) {
	r := &Result{Config: Config{Replicas: 3, Clients: 10, Services: 5, Rate: 5}}
	r.Reads[0] = serverReads{Replicas: 1, RPC: 100, Changes: 100, Minutes: 1}
	r.Reads[1] = serverReads{Replicas: 3, Unread: "metrics timed out"}
	targets, md := r.Targets(), r.Markdown()
	if !strings.Contains(targets, "not counted") || strings.Contains(targets, "RPCs per change, 3 replicas ≤ 3× 1 | 0.00") {
		t.Errorf("server reads not counted, yet the targets say:\n%s", targets)
	}
	if !strings.Contains(md, "not counted (metrics timed out)") {
		t.Errorf("the report does not say why the server reads are missing:\n%s", md)
	}
	if !strings.Contains(targets, "| no endpoint ever missing, no version ever backwards | 0 removed, 0 short assignments, 0 reverts | met |") {
		t.Errorf("a clean run's targets:\n%s", targets)
	}
	for name, bad := range map[string]func(*Result){
		"removed": func(r *Result) { r.Removed = 1 },
		"short":   func(r *Result) { r.Short = 1 },
		"revert":  func(r *Result) { r.LaterGot.Reverts = 1 },
	} {
		c := *r
		bad(&c)
		if !strings.Contains(c.Targets(), "reverts | NOT met |") {
			t.Errorf("%s: the target is met:\n%s", name, c.Targets())
		}
	}
}
