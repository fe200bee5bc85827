package xds

import (
	"context"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

func deltaAck(r *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryRequest {
	return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}
}

func versions(r *discoveryv3.DeltaDiscoveryResponse) map[string]string {
	m := map[string]string{}
	for _, x := range r.Resources {
		m[x.Name] = x.Version
	}
	return m
}

func TestDeltaADS(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(3), nil)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(ClusterType)) // empty first CDS request = wildcard
	r := c.recv()
	wantNames(t, deltaNames(r), "svc-0", "svc-1", "svc-2")
	c.send(deltaAck(r))
	c.send(deltaReq(EndpointType, "svc-0", "svc-1"))
	e := c.recv()
	wantNames(t, deltaNames(e), "svc-0", "svc-1")
	c.send(deltaAck(e))

	// Only the changed resource, with its new version.
	s.Apply([]Resource{assignment("svc-0", 7)}, nil)
	e2 := c.recv()
	wantNames(t, deltaNames(e2), "svc-0")
	if versions(e2)["svc-0"] == versions(e)["svc-0"] {
		t.Fatal("version did not change")
	}
	c.send(deltaAck(e2))

	// Unsubscribe, then a change of that name is not sent.
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesUnsubscribe: []string{"svc-1"}})
	waitFor(t, func() bool { return subscribed(s, EndpointType) == 1 })
	s.Apply([]Resource{assignment("svc-1", 9)}, nil)
	c.none(100 * time.Millisecond)

	// A removal: removed_resources, CDS first then EDS (both after upserts).
	s.Apply(nil, []Key{{ClusterType, "svc-2"}, {EndpointType, "svc-0"}})
	r1, r2 := c.recv(), c.recv()
	if r1.TypeUrl != ClusterType || len(r1.RemovedResources) != 1 || r1.RemovedResources[0] != "svc-2" {
		t.Fatalf("first removal %v", r1)
	}
	if r2.TypeUrl != EndpointType || len(r2.RemovedResources) != 1 || r2.RemovedResources[0] != "svc-0" {
		t.Fatalf("second removal %v", r2)
	}
}

func TestDeltaReconnect(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(50), nil)

	// First connection: learn every version.
	c := openDeltaADS(t, cc)
	c.send(deltaReq(ClusterType, "*"))
	held := map[string]map[string]string{ClusterType: versions(c.recv())}
	var all []string
	for i := range 50 {
		all = append(all, svcName(i))
	}
	c.send(deltaReq(EndpointType, all...))
	held[EndpointType] = versions(c.recv())

	// A second replica fed the same Apply serves the same versions.
	s2 := NewServer(Options{})
	cc2 := serve(t, s2)
	s2.Apply(services(50), nil)

	for _, tc := range []struct {
		name string
		s    *Server
		cc   *grpc.ClientConn
	}{{"same server", s, cc}, {"second server", s2, cc2}} {
		t.Run(tc.name, func(t *testing.T) {
			r := openDeltaADS(t, tc.cc)
			r.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: ClusterType,
				ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: held[ClusterType]})
			r.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType,
				ResourceNamesSubscribe: all, InitialResourceVersions: held[EndpointType]})
			r.none(200 * time.Millisecond)
			// Then a change and a stale claim still reach it.
			tc.s.Apply([]Resource{assignment("svc-4", 1)}, nil)
			wantNames(t, deltaNames(r.recv()), "svc-4")
		})
	}

	// A claim the server no longer has is removed; a differing version re-sent.
	old := map[string]string{"svc-0": "deadbeef", "gone": "1"}
	r := openDeltaADS(t, cc2)
	r.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
		ResourceNamesSubscribe: []string{"svc-0", "gone"}, InitialResourceVersions: old})
	got := r.recv()
	wantNames(t, deltaNames(got), "svc-0")
	rem := got.RemovedResources
	if len(rem) == 0 {
		rem = r.recv().RemovedResources
	}
	wantNames(t, rem, "gone")
}

func TestDeltaNACK(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(2), nil)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(ClusterType, "*"))
	c.send(deltaAck(c.recv()))
	s.Apply([]Resource{cluster("svc-1", 5*time.Second)}, nil)
	bad := c.recv()
	n := deltaAck(bad)
	n.ErrorDetail = &statuspb.Status{Code: 3, Message: "rejected"}
	c.send(n)
	c.none(300 * time.Millisecond)
	if got := counter(t, s.m.nacks.WithLabelValues("cluster")); got != 1 {
		t.Fatalf("nacks = %v", got)
	}
	s.Apply([]Resource{cluster("svc-1", 6*time.Second)}, nil)
	wantNames(t, deltaNames(c.recv()), "svc-1")
}

func TestDeltaWildcardWithNames(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(2), nil)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(ClusterType, "*", "svc-0"))
	r := c.recv()
	wantNames(t, deltaNames(r), "svc-0", "svc-1")
	// Leaving wildcard keeps the explicit name; the others are forgotten.
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesUnsubscribe: []string{"*"}})
	waitFor(t, func() bool { return !s.Clients()[0].Types[0].Wildcard })
	s.Apply([]Resource{cluster("svc-1", 3*time.Second)}, nil)
	c.none(100 * time.Millisecond)
	s.Apply([]Resource{cluster("svc-0", 3*time.Second)}, nil)
	wantNames(t, deltaNames(c.recv()), "svc-0")
	// Unknown explicit names are reported as removed after the wait.
}

func TestDeltaUnknownName(t *testing.T) {
	s := NewServer(Options{UnknownNameWait: 200 * time.Millisecond})
	cc := serve(t, s)
	start := time.Now() // the wait is a window after readiness
	s.Apply(services(1), nil)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(EndpointType, "svc-0", "nope"))
	wantNames(t, deltaNames(c.recv()), "svc-0")
	r := c.recv()
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("unknown name answered after %v, want ≥ the 200ms wait", el)
	}
	if len(r.Resources) != 0 || len(r.RemovedResources) != 1 || r.RemovedResources[0] != "nope" {
		t.Fatalf("got %v, want nope in removed_resources", r)
	}
}

func TestApplySkipsBadResources(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	bad := cluster("mislabelled", time.Second)
	bad.Type = EndpointType
	s.Apply(append(services(1), bad, Resource{Type: ClusterType, Name: "nil"}), nil)
	c := openADS(t, cc)
	c.send(req(ClusterType))
	wantNames(t, names(t, c.recv()), "svc-0")
}

// TestWildcardToggleDropsStaleChanges: a removal queued for a name a
// wildcard watch never held must not survive the wildcard being turned
// off. If it did, after the name came back and the wildcard was turned on
// again, it would make the scan skip the name (a pending change is newer
// than the frame) and the removal phase would drop it (the client holds
// nothing): the client would never be sent the resource.
func TestWildcardToggleDropsStaleChanges(t *testing.T) {
	s := NewServer(Options{})
	s.Apply(services(100), nil)
	c, _ := s.connect(context.Background(), "delta_ads", true)
	defer s.disconnect(c)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"*"}}, nil)
	for owed(c) != nil {
	}
	x := svcName(150)
	s.Apply([]Resource{assignment(x, 1)}, nil) // marked for the wildcard
	s.Apply(nil, []Key{{EndpointType, x}})     // coalesced to a removal; never held
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesUnsubscribe: []string{"*"}}, nil)
	s.Apply([]Resource{assignment(x, 2)}, nil) // not marked: no longer wildcard
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"*"}}, nil)
	if got, _ := drainFor(t, c, x); !got {
		t.Fatalf("%s exists and the watch is wildcard again, but was never sent", x)
	}
}

// TestSubscriptionRemovedBeforeAnswerIsAnswered: a delta subscription to an
// existing name whose resource is removed before the response is built is
// answered, by the removal (doc.go: every subscription is answered).
func TestSubscriptionRemovedBeforeAnswerIsAnswered(t *testing.T) {
	s := NewServer(Options{})
	s.Apply(services(10), nil)
	c, _ := s.connect(context.Background(), "delta_ads", true)
	defer s.disconnect(c)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: []string{svcName(1)}}, nil)
	for owed(c) != nil {
	}
	x := svcName(2)
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{x}}, nil)
	s.Apply(nil, []Key{{EndpointType, x}})
	if sent, removed := drainFor(t, c, x); !sent && !removed {
		t.Fatalf("the subscription to %s was never answered", x)
	}
}

// drainFor takes every response c is owed and reports whether one carried
// name as a resource (sent) or among its removed names.
func drainFor(t *testing.T, c *client, name string) (sent, removed bool) {
	t.Helper()
	for o := owed(c); o != nil; o = owed(c) {
		list, gone, _ := wireOf(t, o.msg)
		for _, e := range list {
			sent = sent || e.name == name
		}
		removed = removed || slices.Contains(gone, name)
	}
	return sent, removed
}
