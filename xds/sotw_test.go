package xds

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSotWADS(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(3), nil)

	c := openADS(t, cc)
	c.send(req(ClusterType))
	r := c.recv()
	wantNames(t, names(t, r), "svc-0", "svc-1", "svc-2")
	c.send(req(EndpointType, "svc-0", "svc-1", "svc-2"))
	c.send(ack(r))
	e := c.recv()
	wantNames(t, names(t, e), "svc-0", "svc-1", "svc-2")
	c.send(ack(e, "svc-0", "svc-1", "svc-2"))

	// An identical Apply is a no-op.
	s.Apply(services(3), nil)
	c.none(100 * time.Millisecond)

	// A single assignment change sends just that assignment.
	s.Apply([]Resource{assignment("svc-1", 1, 2)}, nil)
	e2 := c.recv()
	wantNames(t, names(t, e2), "svc-1")
	if e2.Nonce == e.Nonce || e2.VersionInfo == e.VersionInfo {
		t.Fatalf("nonce/version not renewed: %q/%q", e2.Nonce, e2.VersionInfo)
	}
	c.send(ack(e2, "svc-0", "svc-1", "svc-2"))

	// Unsubscribing a name stops its updates.
	c.send(ack(e2, "svc-0", "svc-2"))
	waitFor(t, func() bool { return subscribed(s, EndpointType) == 2 })
	s.Apply([]Resource{assignment("svc-1", 3)}, nil)
	c.none(100 * time.Millisecond)
}

// subscribed counts the explicit EDS names of the (single) client.
func subscribed(s *Server, typ string) int {
	n := 0
	for _, c := range s.Clients() {
		for _, ts := range c.Types {
			if ts.TypeURL == typ {
				n += ts.Subscribed
			}
		}
	}
	return n
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", patience)
		}
		<-tick.C
	}
}

func TestReadinessGate(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	c := openADS(t, cc)
	c.send(req(ClusterType))
	e := openDeltaADS(t, cc)
	e.send(deltaReq(ClusterType))
	c.none(150 * time.Millisecond)
	e.none(10 * time.Millisecond)
	if s.Ready() {
		t.Fatal("ready before the first Apply")
	}
	s.Apply(services(2), nil)
	if !s.Ready() {
		t.Fatal("not ready after the first Apply")
	}
	wantNames(t, names(t, c.recv()), "svc-0", "svc-1")
	wantNames(t, deltaNames(e.recv()), "svc-0", "svc-1")
}

func TestFirstApplyEmptyAnswersWildcard(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	c := openADS(t, cc)
	c.send(req(ListenerType))
	s.Apply(nil, nil) // synced, nothing to serve: still an answer
	r := c.recv()
	if len(r.Resources) != 0 || r.TypeUrl != ListenerType {
		t.Fatalf("got %v, want an empty LDS response", r)
	}
}

func TestNamedCDS(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(10), nil)
	c := openADS(t, cc)
	c.send(req(ClusterType, "svc-3", "svc-7"))
	r := c.recv()
	wantNames(t, names(t, r), "svc-3", "svc-7")
	// Adding a name: the full set of the subscription.
	c.send(ack(r, "svc-3", "svc-7", "svc-8"))
	wantNames(t, names(t, c.recv()), "svc-3", "svc-7", "svc-8")
	// A change of an unsubscribed cluster is not sent.
	s.Apply([]Resource{cluster("svc-1", 2*time.Second)}, nil)
	c.none(100 * time.Millisecond)
}

func TestUnknownNameWait(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		want []string // SotW names in the answer; nil: none after the first
	}{
		{"eds gets an empty assignment", EndpointType, []string{"nope"}},
		// The first response already told the client: nothing to add.
		{"cds gets the set without it", ClusterType, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(Options{UnknownNameWait: 200 * time.Millisecond})
			cc := serve(t, s)
			start := time.Now() // the wait is a window after readiness
			s.Apply(services(1), nil)
			c := openADS(t, cc)
			names0 := []string{"nope"}
			if tt.typ == ClusterType {
				names0 = []string{"svc-0", "nope"}
				wantNames(t, names(t, openAndFirst(t, c, tt.typ, names0)), "svc-0")
			} else {
				c.send(req(tt.typ, names0...))
			}
			if tt.want == nil {
				c.none(400 * time.Millisecond)
			} else {
				// Answered once the wait is over, on its own: nothing else
				// happens before the deadline of recv.
				r := c.recv()
				if el := time.Since(start); el < 150*time.Millisecond {
					t.Fatalf("answered after %v, before the 200ms wait", el)
				}
				wantNames(t, names(t, r), tt.want...)
			}
			// The name appearing later is delivered.
			s.Apply([]Resource{cluster("nope", time.Second), assignment("nope", 5)}, nil)
			got := names(t, c.recv())
			if tt.typ == ClusterType {
				wantNames(t, got, "nope", "svc-0")
			} else {
				wantNames(t, got, "nope")
			}
		})
	}
}

func openAndFirst(_ *testing.T, c *sotw, typ string, n []string) *discoveryv3.DiscoveryResponse {
	c.send(req(typ, n...))
	return c.recv()
}

func TestSotWNACK(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewServer(Options{Registerer: reg})
	cc := serve(t, s)
	s.Apply(services(2), nil)
	c := openADS(t, cc)
	c.send(req(ClusterType))
	r1 := c.recv()
	c.send(ack(r1))
	waitFor(t, func() bool { return s.Clients()[0].Types[0].AckedVersion == r1.VersionInfo })
	s.Apply([]Resource{cluster("svc-0", 3*time.Second)}, nil)
	bad := c.recv()
	nack := ack(r1)
	nack.ResponseNonce = bad.Nonce
	nack.ErrorDetail = &statuspb.Status{Code: 3, Message: "bad cluster"}
	c.send(nack)
	// No further copy of that version: re-sending a NACKed version would
	// loop, the client rejecting it each time.
	c.none(300 * time.Millisecond)
	if n := counter(t, s.m.nacks.WithLabelValues("cluster")); n != 1 {
		t.Fatalf("nacks_total = %v, want 1", n)
	}
	st := s.Clients()[0].Types[0]
	if st.NACK == nil || st.NACK.Error != "bad cluster" || st.NACK.Nonce != bad.Nonce || st.AckedVersion != r1.VersionInfo {
		t.Fatalf("status %+v, nack %+v", st, st.NACK)
	}
	// The next real change is delivered.
	s.Apply([]Resource{cluster("svc-0", 4*time.Second)}, nil)
	r3 := c.recv()
	wantNames(t, names(t, r3), "svc-0", "svc-1")
	c.send(ack(r3))
	waitFor(t, func() bool { return s.Clients()[0].Types[0].AckedVersion == r3.VersionInfo })
}

func counter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
