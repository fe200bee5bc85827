package xds

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// ev is one response of either protocol, reduced to what ordering tests
// look at.
type ev struct {
	typ     string
	names   []string
	removed []string
}

func (e ev) String() string {
	return fmt.Sprintf("%s%v-%v", shortType(e.typ), e.names, e.removed)
}

// adsClient hides the protocol: subscribe and next (which ACKs).
type adsClient interface {
	subscribe(typ string, names ...string)
	next() ev
	none(d time.Duration)
}

type sotwADS struct {
	t    testing.TB
	c    *sotw
	subs map[string][]string
}

func (a *sotwADS) subscribe(typ string, names ...string) {
	a.subs[typ] = names
	r := req(typ, names...)
	a.c.send(r)
}

func (a *sotwADS) next() ev {
	r := a.c.recv()
	a.c.send(ack(r, a.subs[r.TypeUrl]...))
	return ev{typ: r.TypeUrl, names: names(a.t, r)}
}

func (a *sotwADS) none(d time.Duration) { a.c.none(d) }

type deltaADS struct {
	c *delta
}

func (a *deltaADS) subscribe(typ string, names ...string) { a.c.send(deltaReq(typ, names...)) }
func (a *deltaADS) next() ev {
	r := a.c.recv()
	a.c.send(deltaAck(r))
	rem := slices.Clone(r.RemovedResources)
	slices.Sort(rem)
	return ev{typ: r.TypeUrl, names: deltaNames(r), removed: rem}
}
func (a *deltaADS) none(d time.Duration) { a.c.none(d) }

var adsVariants = []struct {
	name string
	open func(t testing.TB, cc *grpc.ClientConn) adsClient
}{
	{"sotw", func(t testing.TB, cc *grpc.ClientConn) adsClient {
		t.Helper()
		return &sotwADS{t: t, c: openADS(t, cc), subs: map[string][]string{}}
	}},
	{"delta", func(t testing.TB, cc *grpc.ClientConn) adsClient {
		t.Helper()
		return &deltaADS{c: openDeltaADS(t, cc)}
	}},
}

func wantEvents(t *testing.T, c adsClient, want ...string) {
	t.Helper()
	var got []string
	for range want {
		got = append(got, c.next().String())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	c.none(100 * time.Millisecond)
}

func TestADSOrder(t *testing.T) {
	for _, v := range adsVariants {
		t.Run(v.name, func(t *testing.T) {
			s := NewServer(Options{UnknownNameWait: time.Minute})
			cc := serve(t, s)
			s.Apply(services(2), nil)
			c := v.open(t, cc)
			c.subscribe(ClusterType)
			c.next()
			// Subscribed ahead to a service that does not exist yet.
			c.subscribe(EndpointType, "svc-0", "svc-1", "new")
			c.next()

			// A new service: its cluster before its assignment, whatever the
			// order inside Apply.
			s.Apply([]Resource{assignment("new", 1), cluster("new", time.Second)}, nil)
			if v.name == "sotw" {
				wantEvents(t, c, "cluster[new svc-0 svc-1]-[]", "endpoint[new]-[]")
			} else {
				wantEvents(t, c, "cluster[new]-[]", "endpoint[new]-[]")
			}

			// A changed cluster is followed by its (unchanged) assignment.
			s.Apply([]Resource{cluster("svc-0", 9*time.Second)}, nil)
			if v.name == "sotw" {
				wantEvents(t, c, "cluster[new svc-0 svc-1]-[]", "endpoint[svc-0]-[]")
			} else {
				wantEvents(t, c, "cluster[svc-0]-[]", "endpoint[svc-0]-[]")
			}

			// Removals come after the upserts of the same change.
			s.Apply([]Resource{assignment("svc-0", 4)}, []Key{{ClusterType, "svc-1"}, {EndpointType, "svc-1"}})
			if v.name == "sotw" {
				// SotW EDS removal is implied by the cluster's removal.
				wantEvents(t, c, "endpoint[svc-0]-[]", "cluster[new svc-0]-[]")
			} else {
				wantEvents(t, c, "endpoint[svc-0]-[]", "cluster[]-[svc-1]", "endpoint[]-[svc-1]")
			}

			// A replaced service: new cluster + assignment before the old
			// cluster goes (SotW keeps it in the first CDS response).
			s.Apply([]Resource{cluster("v2", time.Second)}, []Key{{ClusterType, "new"}})
			if v.name == "sotw" {
				wantEvents(t, c, "cluster[new svc-0 v2]-[]", "cluster[svc-0 v2]-[]")
			} else {
				wantEvents(t, c, "cluster[v2]-[]", "cluster[]-[new]")
			}
		})
	}
}

// TestSingleChangeSendsOne checks that a change of one endpoint among many
// subscribed clusters sends that one assignment and nothing else.
func TestSingleChangeSendsOne(t *testing.T) {
	const n = 1000
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(n), nil)
	var all []string
	for i := range n {
		all = append(all, svcName(i))
	}
	sc := openADS(t, cc)
	sc.send(req(EndpointType, all...))
	r := sc.recv()
	if len(r.Resources) != n {
		t.Fatalf("initial SotW EDS carried %d, want %d", len(r.Resources), n)
	}
	sc.send(ack(r, all...))
	dc := openDeltaADS(t, cc)
	dc.send(deltaReq(EndpointType, all...))
	dr := dc.recv()
	if len(dr.Resources) != n {
		t.Fatalf("initial delta EDS carried %d, want %d", len(dr.Resources), n)
	}
	dc.send(deltaAck(dr))

	s.Apply([]Resource{assignment("svc-500", 1, 2)}, nil)
	r = sc.recv()
	wantNames(t, names(t, r), "svc-500")
	if sz := protoSize(r); sz > 1024 {
		t.Fatalf("SotW EDS response is %d bytes, want ≤ 1 KB", sz)
	}
	wantNames(t, deltaNames(dc.recv()), "svc-500")
	sc.none(50 * time.Millisecond)
	dc.none(10 * time.Millisecond)
}

func protoSize(r *discoveryv3.DiscoveryResponse) int {
	n := 0
	for _, a := range r.Resources {
		n += len(a.Value) + len(a.TypeUrl)
	}
	return n + len(r.Nonce) + len(r.VersionInfo) + len(r.TypeUrl)
}
