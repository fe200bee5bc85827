package xds

import (
	"fmt"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

func invented(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		reqs   []*discoveryv3.DeltaDiscoveryRequest
		reason string
	}{
		{"names per request", Limits{NamesPerRequest: 10},
			[]*discoveryv3.DeltaDiscoveryRequest{deltaReq(EndpointType, invented("n", 11)...)},
			reasonNamesPerRequest},
		{"initial versions per request", Limits{NamesPerRequest: 10},
			[]*discoveryv3.DeltaDiscoveryRequest{{Node: envoyNode, TypeUrl: ClusterType,
				InitialResourceVersions: map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1",
					"g": "1", "h": "1", "i": "1", "j": "1", "k": "1"}}},
			reasonNamesPerRequest},
		{"names per subscription", Limits{NamesPerSubscription: 5},
			[]*discoveryv3.DeltaDiscoveryRequest{deltaReq(EndpointType, "svc-0", "svc-1", "svc-2"),
				{TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"svc-3", "svc-4", "svc-5"}}},
			reasonNamesPerSub},
		{"unknown names", Limits{UnknownNames: 5},
			[]*discoveryv3.DeltaDiscoveryRequest{deltaReq(EndpointType, invented("n", 6)...)},
			reasonUnknownNames},
		{"request size", Limits{RequestBytes: 1024},
			[]*discoveryv3.DeltaDiscoveryRequest{deltaReq(EndpointType, strings.Repeat("x", 2000))},
			reasonRequestBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(Options{Limits: tt.limits})
			cc := dial(t, listen(t, s, s.GRPCOptions()...))
			s.Apply(services(10), nil)
			got := refusedWith(t, cc, tt.reqs...)
			if got.Code() != codes.ResourceExhausted || got.Message() == "" {
				t.Fatalf("stream ended with %v, want ResourceExhausted with a message", got)
			}
			if n := counter(t, s.m.refused.WithLabelValues(tt.reason)); n != 1 {
				t.Fatalf("refused{%s} = %v, want 1", tt.reason, n)
			}
			waitFor(t, func() bool { return len(s.Clients()) == 0 })
			if got := live(s, EndpointType); got != 10 {
				t.Fatalf("%d assignment slots after the refusal, want the 10 served", got)
			}
		})
	}
}

func TestStreamLimits(t *testing.T) {
	s := NewServer(Options{Limits: Limits{Streams: 3, StreamsPerConnection: 2}})
	addr := listen(t, s, s.GRPCOptions()...)
	s.Apply(services(1), nil)
	one := dial(t, addr)
	for range 2 {
		c := openDeltaADS(t, one)
		c.send(deltaReq(ClusterType))
		c.recv()
	}
	if got := refusedWith(t, one, deltaReq(ClusterType)); got.Code() != codes.ResourceExhausted {
		t.Fatalf("third stream on one connection: %v, want ResourceExhausted", got)
	}
	two := dial(t, addr)
	c := openDeltaADS(t, two)
	c.send(deltaReq(ClusterType))
	c.recv()
	if got := refusedWith(t, two, deltaReq(ClusterType)); got.Code() != codes.ResourceExhausted {
		t.Fatalf("fourth stream: %v, want ResourceExhausted", got)
	}
	for reason, want := range map[string]float64{reasonStreamsPerConn: 1, reasonStreams: 1} {
		if n := counter(t, s.m.refused.WithLabelValues(reason)); n != want {
			t.Fatalf("refused{%s} = %v, want %v", reason, n, want)
		}
	}
}

// TestHostileClientMemoryReturned: a client claiming 100,000 invented names
// and subscribing to 100,000 more (limits raised so that it is served), and
// streams sending 500 invented type URLs, hold memory only while connected.
func TestHostileClientMemoryReturned(t *testing.T) {
	n := 100000
	if raceEnabled {
		n = 10000
	}
	s := NewServer(Options{UnknownNameWait: longWait,
		Limits: Limits{NamesPerRequest: n, NamesPerSubscription: n, UnknownNames: 2 * n, RequestBytes: 64 << 20}})
	cc := dial(t, listen(t, s, s.GRPCOptions()...), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
	s.Apply(services(100), nil)
	pastWindow(s)
	honest := openDeltaADS(t, cc)
	honest.send(deltaReq(ClusterType, "*"))
	honest.recv()
	before := heapInUse()

	claims := map[string]string{}
	for _, name := range invented("claimed", n) {
		claims[name] = "1"
	}
	h := openDeltaADS(t, cc)
	h.send(&discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: ClusterType,
		ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: claims})
	h.send(deltaReq(EndpointType, invented("subscribed", n)...))
	for got := 0; got < 2*n; { // every invented name is answered as removed
		r := h.recv()
		got += len(r.RemovedResources)
		h.send(deltaAck(r))
	}
	during := heapInUse()
	for range 500 / maxUnknownTypes {
		var reqs []*discoveryv3.DeltaDiscoveryRequest
		for i := range maxUnknownTypes + 1 {
			reqs = append(reqs, deltaReq(fmt.Sprintf("type.example/invented.T%d", i), "x"))
		}
		if got := refusedWith(t, cc, reqs...); got.Code() != codes.InvalidArgument {
			t.Fatalf("invented types: %v, want InvalidArgument", got)
		}
	}
	_ = h.st.CloseSend()
	waitFor(t, func() bool { return len(s.Clients()) == 1 })
	after := heapInUse()
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	t.Logf("heap before %.1f MB, during %.1f MB, after %.1f MB", mb(before), mb(during), mb(after))
	if during < before+uint64(n)*100 {
		t.Fatalf("the hostile client held only %.1f MB: the test measures nothing", mb(during-before))
	}
	if after > before+2<<20 {
		t.Fatalf("%.1f MB still held after the hostile client left", mb(after-before))
	}
	s.mu.Lock()
	ntypes := len(s.types)
	s.mu.Unlock()
	if ntypes > 4 || live(s, ClusterType) != 100 || live(s, EndpointType) != 100 {
		t.Fatalf("after: %d types, %d cluster and %d assignment slots", ntypes, live(s, ClusterType), live(s, EndpointType))
	}
}
