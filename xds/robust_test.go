package xds

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// TestStuckClient checks that a client that stops reading blocks only its
// own writer: the others converge and its pending state stays bounded
// by its subscription.
func TestStuckClient(t *testing.T) {
	const n = 50
	s := NewServer(Options{})
	// A static stream window: with grpc-go's default BDP estimation the
	// windows grow to as much as 16 MiB, more when the round trip is long
	// (a loaded machine), and the stuck stream could take every round
	// without its writer ever blocking.
	cc := dial(t, listen(t, s), grpc.WithStaticStreamWindowSize(64<<10))
	s.Apply(bigServices(n, 0), nil)
	var all []string
	for i := range n {
		all = append(all, svcName(i))
	}

	// The stuck client subscribes and never reads a response.
	ctx := t.Context()
	stuck, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stuck.Send(req(EndpointType, all...)); err != nil {
		t.Fatal(err)
	}

	good := openADS(t, cc)
	good.send(req(EndpointType, all...))
	r := good.recv()
	good.send(ack(r, all...))

	// Each round changes every assignment (~10 KB each, 1 MB a round): the
	// stuck stream's flow-control window is soon exhausted.
	const rounds = 6
	for round := 1; round <= rounds; round++ {
		s.Apply(bigServices(n, round), nil)
		got := 0
		for got < n {
			r := good.recv()
			got += len(r.Resources)
			good.send(ack(r, all...))
		}
		if got != n {
			t.Fatalf("round %d: good client got %d assignments, want %d", round, got, n)
		}
	}
	for _, c := range s.Clients() {
		for _, ts := range c.Types {
			if ts.Pending > n || ts.Held > n {
				t.Fatalf("client %s: pending %d, held %d; want ≤ %d", c.Peer, ts.Pending, ts.Held, n)
			}
		}
	}
	if !stuckWriter(s) {
		t.Fatal("the stuck client's writer never blocked: the test does not test anything")
	}
	// A small change to names the stuck client holds returns while that
	// client's writer stays blocked: Apply never waits for a writer, which
	// would wait for as long as the client does not read.
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		s.Apply([]Resource{assignment("svc-0", 1)}, nil)
	}()
	select {
	case <-applied:
	case <-time.After(patience):
		t.Fatal("Apply did not return with a stuck subscriber")
	}
	if !stuckWriter(s) {
		t.Fatal("the stuck client's writer was released: the test no longer tests Apply against a blocked writer")
	}
	wantNames(t, names(t, good.recv()), "svc-0")
}

// stuckWriter reports whether a client of s has responses pending, which
// only a writer blocked on a client that does not read leaves.
func stuckWriter(s *Server) bool {
	for _, c := range s.Clients() {
		for _, ts := range c.Types {
			if ts.Pending > 0 {
				return true
			}
		}
	}
	return false
}

// bigServices are n cluster+assignment pairs with 400 endpoints each; round
// changes the ports.
func bigServices(n, round int) []Resource {
	var rs []Resource
	for i := range n {
		ports := make([]uint32, 400)
		for j := range ports {
			ports[j] = uint32(1000 + round*300 + j)
		}
		rs = append(rs, cluster(svcName(i), time.Second), assignment(svcName(i), ports...))
	}
	return rs
}

func listener(name string) Resource {
	return Resource{Type: ListenerType, Name: name, GRPCOnly: true, Message: &listenerv3.Listener{Name: name}}
}

func TestGRPCOnlyVisibility(t *testing.T) {
	s := NewServer(Options{UnknownNameWait: time.Minute})
	cc := serve(t, s)
	s.Apply(append(services(1), listener("svc-0")), nil)

	grpcReq := func(typ string, names ...string) *discoveryv3.DiscoveryRequest {
		r := req(typ, names...)
		r.Node = grpcNode
		return r
	}
	tests := []struct {
		name string
		node *corev3.Node
		req  *discoveryv3.DiscoveryRequest
		want []string
	}{
		{"grpc named", grpcNode, grpcReq(ListenerType, "svc-0"), []string{ListenerType}},
		{"grpc wildcard", grpcNode, grpcReq(ListenerType), []string{ListenerType}},
		{"envoy wildcard", envoyNode, req(ListenerType), nil},
		// Answered at once, not after UnknownNameWait: the name exists,
		// just not for this client.
		{"envoy named", envoyNode, req(ListenerType, "svc-0"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openADS(t, cc)
			c.send(tt.req)
			r := c.recv()
			if got := names(t, r); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	// An Envoy never sees a gRPC-only change either.
	c := openADS(t, cc)
	c.send(req(ListenerType))
	c.recv()
	s.Apply([]Resource{listener("other")}, nil)
	c.none(100 * time.Millisecond)
}

func TestPerTypeStreams(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply(services(3), nil)

	cds := openCDS(t, cc)
	cds.send(&discoveryv3.DiscoveryRequest{Node: envoyNode}) // type implied by the service
	r := cds.recv()
	wantNames(t, names(t, r), "svc-0", "svc-1", "svc-2")
	cds.send(ack(r))

	eds := openEDS(t, cc)
	eds.send(&discoveryv3.DiscoveryRequest{Node: envoyNode, ResourceNames: []string{"svc-0", "svc-2"}})
	e := eds.recv()
	wantNames(t, names(t, e), "svc-0", "svc-2")
	eds.send(ack(e, "svc-0", "svc-2"))

	de := openDeltaEDS(t, cc)
	de.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, ResourceNamesSubscribe: []string{"svc-2"}})
	d := de.recv()
	wantNames(t, deltaNames(d), "svc-2")
	de.send(deltaAck(d))

	// A cluster change reaches CDS and re-sends the assignment on the EDS
	// streams (warming), without any cross-stream ordering.
	s.Apply([]Resource{cluster("svc-2", 3*time.Second)}, nil)
	wantNames(t, names(t, cds.recv()), "svc-0", "svc-1", "svc-2")
	wantNames(t, names(t, eds.recv()), "svc-2")
	wantNames(t, deltaNames(de.recv()), "svc-2")
}

// TestIndexReuse checks that watch and slot indexes freed by a disconnect or
// an unsubscribe carry nothing over to their next owner.
func TestIndexReuse(t *testing.T) {
	s := NewServer(Options{UnknownNameWait: time.Minute})
	cc := serve(t, s)
	s.Apply(services(3), nil)

	ctx, cancel := context.WithCancel(context.Background())
	old, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Send(req(EndpointType, "svc-0")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitFor(t, func() bool { return len(s.Clients()) == 0 })

	c := openADS(t, cc) // takes the freed watch index
	c.send(req(EndpointType, "svc-1", "x"))
	r := c.recv()
	wantNames(t, names(t, r), "svc-1")
	c.send(ack(r, "svc-1", "y", "z")) // x's slot is released, y may take its index
	waitFor(t, func() bool { return subscribed(s, EndpointType) == 3 })

	s.Apply([]Resource{assignment("svc-0", 5), assignment("x", 1)}, nil)
	c.none(100 * time.Millisecond)
	s.Apply([]Resource{assignment("y", 2)}, nil)
	wantNames(t, names(t, c.recv()), "y")
	s.Apply([]Resource{assignment("svc-1", 6)}, nil)
	wantNames(t, names(t, c.recv()), "svc-1")
}
