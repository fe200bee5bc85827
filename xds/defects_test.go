package xds

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Regression tests of the engine's request side against the xDS spec, one
// per defect; see doc.go for the chosen behaviours.

// longWait is an UnknownNameWait far beyond patience. A test in which
// unknown names must be answered at once (after pastWindow) serves with it,
// so that an answer held back for the wait fails the test rather than
// arriving late within patience.
const longWait = time.Hour

// pastWindow moves s's readiness a day back, further than any test's
// UnknownNameWait, so that unknown names are answered at once (see
// deadline).
func pastWindow(s *Server) { s.readyNs.Store(time.Now().Add(-24 * time.Hour).UnixNano()) }

// served is a server of Options o on loopback holding services(n), and a
// connection to it.
func served(t *testing.T, o Options, n int) (*Server, *grpc.ClientConn) {
	t.Helper()
	s := NewServer(o)
	cc := serve(t, s)
	s.Apply(services(n), nil)
	return s, cc
}

// endpointVersions are the content-hash versions of every assignment s holds.
func endpointVersions(s *Server) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for name, sl := range s.types[EndpointType].slots {
		if sl.cur != nil {
			out[name] = sl.cur.version
		}
	}
	return out
}

// live counts the slots of a type in use (free indexes excluded).
func live(s *Server, typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.types[typ]
	if t == nil {
		return 0
	}
	used, top := 0, -1
	for i, sl := range t.byIdx.all() {
		if sl != nil {
			used, top = used+1, i
			if sl.idx != i || t.slots[sl.name] != sl {
				panic(fmt.Sprintf("slot %q at index %d has index %d", sl.name, i, sl.idx))
			}
		}
	}
	if used != len(t.slots) {
		panic(fmt.Sprintf("%d slots, %d indexes in use", len(t.slots), used))
	}
	if span := t.byIdx.span(); span != top+1 || t.total() != span {
		panic(fmt.Sprintf("span %d (total %d), highest index in use %d", span, t.total(), top))
	}
	return len(t.slots)
}

// TestDeltaReconnectIsLinear times a delta reconnect listing n names in
// both resource_names_subscribe and initial_resource_versions at two sizes:
// 8 times the names must cost well under the 64 times of a quadratic scan,
// such as a scan of the type per claimed name under the server lock; cache
// effects make a linear reconnect cost more than 8 times too.
func TestDeltaReconnectIsLinear(t *testing.T) {
	small, large := reconnectTime(t, 1000), reconnectTime(t, 8000)
	t.Logf("reconnect of 1,000 names %v, of 8,000 names %v", small, large)
	if large > 32*small && large > 20*time.Millisecond {
		t.Fatalf("8 times the names took %.0f times as long", float64(large)/float64(small))
	}
}

// reconnectTime is the shortest of three delta reconnects of n names with
// nothing changed (CPU time of the handling goroutine's thread), each
// checked to owe the client nothing.
func reconnectTime(t *testing.T, n int) time.Duration {
	t.Helper()
	s := NewServer(Options{})
	var rs []Resource
	for i := range n {
		rs = append(rs, assignment(svcName(i)))
	}
	s.Apply(rs, nil)
	initial := endpointVersions(s)
	sub := slices.Collect(maps.Keys(initial))
	best := time.Hour
	for range 3 {
		c, _ := s.connect(context.Background(), "test", true)
		runtime.GC() // and none during the call: its assists are not the engine's cost
		gc := debug.SetGCPercent(-1)
		best = min(best, onThread(func() {
			c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
				ResourceNamesSubscribe: sub, InitialResourceVersions: initial}, nil)
		}))
		debug.SetGCPercent(gc)
		o := owed(c)
		s.disconnect(c)
		if o != nil {
			t.Fatalf("a reconnect with nothing changed is owed %d resources", o.resources)
		}
	}
	return best
}

func TestClaimedNamesAreNotKept(t *testing.T) {
	s, cc := served(t, Options{}, 2)
	for round := range 3 {
		claims := map[string]string{}
		for i := range 5000 {
			claims[fmt.Sprintf("invented-%d-%d", round, i)] = "1"
		}
		c := openDeltaADS(t, cc)
		c.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: ClusterType,
			ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: claims})
		// The spec: what the client claims and the server lacks is removed.
		removed := 0
		for removed < len(claims) {
			r := c.recv()
			removed += len(r.RemovedResources)
			c.send(deltaAck(r))
		}
		_ = c.st.CloseSend()
		waitFor(t, func() bool { return len(s.Clients()) == 0 })
	}
	if got := live(s, ClusterType); got != 2 {
		t.Fatalf("%d cluster slots after the clients left, want the 2 served", got)
	}
}

// shortCtx is a stream context that ends after patience, so that a stream the
// server fails to end fails the test instead of hanging it.
func shortCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// streamStatus reads st until it ends and returns its status.
func streamStatus[Resp any](st interface{ Recv() (*Resp, error) }) *status.Status {
	for {
		if _, err := st.Recv(); err != nil {
			return status.Convert(err)
		}
	}
}

func TestUnknownTypes(t *testing.T) {
	s, cc := served(t, Options{UnknownNameWait: longWait}, 1)
	pastWindow(s)

	// A type the server does not serve is answered, empty, and holds
	// nothing once the stream ends.
	c := openADS(t, cc)
	c.send(req("type.example/invented.T"))
	if r := c.recv(); len(r.Resources) != 0 || r.TypeUrl != "type.example/invented.T" {
		t.Fatalf("got %v, want an empty response", r)
	}
	d := openDeltaADS(t, cc)
	d.send(deltaReq("type.example/invented.T", "x"))
	if r := d.recv(); !slices.Equal(r.RemovedResources, []string{"x"}) {
		t.Fatalf("got %v, want x removed", r)
	}

	// 500 of them on one stream: refused after a few, nothing kept.
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(shortCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if st.Send(req(fmt.Sprintf("type.example/invented.T%d", i), "x")) != nil {
			break
		}
	}
	if got := streamStatus[discoveryv3.DiscoveryResponse](st); got.Code() != codes.InvalidArgument {
		t.Fatalf("stream ended with %v, want InvalidArgument", got)
	}
	s.mu.Lock()
	ntypes := len(s.types)
	s.mu.Unlock()
	if ntypes > 4 {
		t.Fatalf("%d type stores, want at most the 4 served", ntypes)
	}
	if got := counter(t, s.m.refused.WithLabelValues(reasonUnknownTypes)); got != 1 {
		t.Fatalf("refused{unknown_types} = %v", got)
	}
}

func TestDeltaUnsubscribeUnderWildcard(t *testing.T) {
	s, cc := served(t, Options{UnknownNameWait: longWait}, 2)
	pastWindow(s)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(ClusterType, "*", "svc-0", "nope"))
	wantDelta(t, c.recv(), []string{"svc-0", "svc-1"}, "nope")
	// Covered by the wildcard: sent again; not covered: removed again.
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesUnsubscribe: []string{"svc-0"}})
	wantNames(t, deltaNames(c.recv()), "svc-0")
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesUnsubscribe: []string{"nope"}})
	if r := c.recv(); !slices.Equal(r.RemovedResources, []string{"nope"}) || len(r.Resources) != 0 {
		t.Fatalf("got %v, want nope removed", r)
	}
	c.none(100 * time.Millisecond)
}

// wantDelta checks the names and the removed names of a delta response.
func wantDelta(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse, names []string, removed ...string) {
	t.Helper()
	wantNames(t, deltaNames(r), names...)
	wantNames(t, slices.Sorted(slices.Values(r.RemovedResources)), removed...)
}

func TestDeltaResubscribeIsAnswered(t *testing.T) {
	s, cc := served(t, Options{UnknownNameWait: longWait}, 2)
	pastWindow(s)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(EndpointType, "svc-0", "nope"))
	wantDelta(t, c.recv(), []string{"svc-0"}, "nope")
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"svc-0"}})
	wantNames(t, deltaNames(c.recv()), "svc-0")
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"nope"}})
	if r := c.recv(); !slices.Equal(r.RemovedResources, []string{"nope"}) {
		t.Fatalf("got %v, want nope removed again", r)
	}
	// A client holding svc-1 through a wildcard that subscribes to it by
	// name gets it again too.
	w := openDeltaADS(t, cc)
	w.send(deltaReq(ClusterType, "*"))
	wantNames(t, deltaNames(w.recv()), "svc-0", "svc-1")
	w.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResourceNamesSubscribe: []string{"svc-1"}})
	wantNames(t, deltaNames(w.recv()), "svc-1")
}

func TestDeltaReconnectBeforeReady(t *testing.T) {
	ref := NewServer(Options{})
	ref.Apply(services(50), nil)
	initial := endpointVersions(ref)
	var sub []string
	for name := range initial {
		sub = append(sub, name)
	}

	s := NewServer(Options{})
	cc := serve(t, s)
	c := openDeltaADS(t, cc) // a bridge restart: the client is back first
	c.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType,
		ResourceNamesSubscribe: sub, InitialResourceVersions: initial})
	c.none(50 * time.Millisecond)
	s.Apply(services(50), nil)
	c.none(200 * time.Millisecond)
	s.Apply([]Resource{assignment("svc-3", 9)}, nil)
	wantNames(t, deltaNames(c.recv()), "svc-3")
}

func TestSotWEmptyListAfterNames(t *testing.T) {
	s, cc := served(t, Options{}, 2)
	c := openADS(t, cc)
	c.send(req(ClusterType, "*"))
	r := c.recv()
	wantNames(t, names(t, r), "svc-0", "svc-1")
	c.send(ack(r)) // after "*", an empty list unsubscribes from everything
	waitFor(t, func() bool { return !s.Clients()[0].Types[0].Wildcard })
	s.Apply([]Resource{cluster("svc-0", 3*time.Second)}, nil)
	c.none(100 * time.Millisecond)

	// The legacy wildcard (never named anything) stays wildcard.
	l := openADS(t, cc)
	l.send(req(ClusterType))
	r = l.recv()
	l.send(ack(r))
	s.Apply([]Resource{cluster("svc-1", 3*time.Second)}, nil)
	wantNames(t, names(t, l.recv()), "svc-0", "svc-1")
}

func TestNamedCDSUnknownNameAnsweredOnce(t *testing.T) {
	_, cc := served(t, Options{UnknownNameWait: 200 * time.Millisecond}, 1)
	c := openADS(t, cc)
	c.send(req(ClusterType, "svc-0", "nope"))
	r := c.recv()
	wantNames(t, names(t, r), "svc-0")
	c.send(ack(r, "svc-0", "nope"))
	c.none(400 * time.Millisecond) // the wait ends: nothing new to say
}

func route(name string) Resource {
	return Resource{Type: RouteType, Name: name, Message: &routev3.RouteConfiguration{Name: name}}
}

func TestRemovalOrder(t *testing.T) {
	for _, v := range adsVariants {
		t.Run(v.name, func(t *testing.T) {
			s := NewServer(Options{})
			cc := serve(t, s)
			envoyListener := listener("svc-0")
			envoyListener.GRPCOnly = false
			s.Apply(append(services(2), envoyListener, route("svc-0")), nil)
			c := v.open(t, cc)
			c.subscribe(ClusterType)
			c.next()
			c.subscribe(EndpointType, "svc-0", "svc-1")
			c.next()
			c.subscribe(ListenerType)
			c.next()
			c.subscribe(RouteType, "svc-0")
			c.next()
			s.Apply(nil, []Key{{ClusterType, "svc-0"}, {EndpointType, "svc-0"}, {ListenerType, "svc-0"}, {RouteType, "svc-0"}})
			if v.name == "sotw" {
				// SotW sends no EDS/RDS removals.
				wantEvents(t, c, "listener[]-[]", "cluster[svc-1]-[]")
			} else {
				wantEvents(t, c, "listener[]-[svc-0]", "route[]-[svc-0]", "cluster[]-[svc-0]", "endpoint[]-[svc-0]")
			}
		})
	}
}

func TestADSWithoutTypeURL(t *testing.T) {
	_, cc := served(t, Options{}, 1)
	for _, delta := range []bool{false, true} {
		ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
		var got *status.Status
		if delta {
			st, err := ads.DeltaAggregatedResources(shortCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode})
			got = streamStatus[discoveryv3.DeltaDiscoveryResponse](st)
		} else {
			st, err := ads.StreamAggregatedResources(shortCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(&discoveryv3.DiscoveryRequest{Node: envoyNode})
			got = streamStatus[discoveryv3.DiscoveryResponse](st)
		}
		if got.Code() != codes.InvalidArgument {
			t.Fatalf("delta=%v: stream ended with %v, want InvalidArgument", delta, got)
		}
	}
}

func TestDeltaUnknownNameAfterWindow(t *testing.T) {
	// Answered within recv's patience means at once: the window, were it
	// still open, would hold the answer an hour.
	s := NewServer(Options{UnknownNameWait: longWait})
	cc := serve(t, s)
	s.Apply(services(1), nil)
	pastWindow(s)
	c := openDeltaADS(t, cc)
	c.send(deltaReq(EndpointType, "nope"))
	if r := c.recv(); !slices.Equal(r.RemovedResources, []string{"nope"}) {
		t.Fatalf("got %v, want nope removed at once", r)
	}
}

// refusedWith opens a stream with open, sends reqs and returns the status
// it ends with.
func refusedWith(t *testing.T, cc *grpc.ClientConn, reqs ...*discoveryv3.DeltaDiscoveryRequest) *status.Status {
	t.Helper()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(shortCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if st.Send(r) != nil {
			break
		}
	}
	return streamStatus[discoveryv3.DeltaDiscoveryResponse](st)
}
