package xds

import (
	"context"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// patience bounds every wait of these tests for something that must
// happen. It is a failure detector, not a measurement: a loaded machine
// must never reach it. A test that proves a response comes at once, rather
// than after a wait of the server's, makes that wait longer than patience.
const patience = 30 * time.Second

// serve starts s on a loopback port and returns a client connection to it.
func serve(t testing.TB, s *Server) *grpc.ClientConn {
	t.Helper()
	return dial(t, listen(t, s))
}

// listen serves s with Codec, as the bridge does, and opts on a loopback
// port until the test ends and returns its address.
func listen(t testing.TB, s *Server, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodecV2(wire.Codec())}, opts...)...)
	s.Register(g)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return lis.Addr().String()
}

// dial returns a client connection to addr, closed when the test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func cluster(name string, timeout time.Duration) Resource {
	return Resource{Type: ClusterType, Name: name, Message: &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout:       durationpb.New(timeout),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}}
}

func assignment(name string, ports ...uint32) Resource {
	var lbs []*endpointv3.LbEndpoint
	for _, p := range ports {
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HealthStatus:        corev3.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(1),
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p},
				}}},
			}},
		})
	}
	return Resource{Type: EndpointType, Name: name, Message: &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs, LoadBalancingWeight: wrapperspb.UInt32(1)}},
	}}
}

// services returns cluster+assignment pairs svc-0..svc-(n-1), one endpoint each.
func services(n int) []Resource {
	var rs []Resource
	for i := range n {
		name := svcName(i)
		rs = append(rs, cluster(name, time.Second), assignment(name, uint32(10000+i)))
	}
	return rs
}

func svcName(i int) string { return "svc-" + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// stream is a raw xDS client stream (SotW or delta, ADS or per-type) whose
// responses are collected by a goroutine.
type stream[Req, Resp any] struct {
	t    testing.TB
	st   grpc.BidiStreamingClient[Req, Resp]
	resp chan *Resp
}

type (
	sotw  = stream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	delta = stream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
)

func open[Req, Resp any](t testing.TB, st grpc.BidiStreamingClient[Req, Resp], err error) *stream[Req, Resp] {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	s := &stream[Req, Resp]{t: t, st: st, resp: make(chan *Resp, 1024)}
	go func() {
		defer close(s.resp)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			s.resp <- r
		}
	}()
	return s
}

func ctxFor(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func openADS(t testing.TB, cc *grpc.ClientConn) *sotw {
	t.Helper()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctxFor(t))
	return open(t, st, err)
}

func openDeltaADS(t testing.TB, cc *grpc.ClientConn) *delta {
	t.Helper()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctxFor(t))
	return open(t, st, err)
}

func openCDS(t testing.TB, cc *grpc.ClientConn) *sotw {
	t.Helper()
	st, err := clusterservice.NewClusterDiscoveryServiceClient(cc).StreamClusters(ctxFor(t))
	return open(t, st, err)
}

func openEDS(t testing.TB, cc *grpc.ClientConn) *sotw {
	t.Helper()
	st, err := endpointservice.NewEndpointDiscoveryServiceClient(cc).StreamEndpoints(ctxFor(t))
	return open(t, st, err)
}

func openDeltaEDS(t testing.TB, cc *grpc.ClientConn) *delta {
	t.Helper()
	st, err := endpointservice.NewEndpointDiscoveryServiceClient(cc).DeltaEndpoints(ctxFor(t))
	return open(t, st, err)
}

func (s *stream[Req, Resp]) send(r *Req) {
	s.t.Helper()
	if err := s.st.Send(r); err != nil {
		s.t.Fatalf("sending: %v", err)
	}
}

// recv waits up to patience for the next response.
func (s *stream[Req, Resp]) recv() *Resp {
	s.t.Helper()
	select {
	case r, ok := <-s.resp:
		if !ok {
			s.t.Fatal("stream ended")
		}
		return r
	case <-time.After(patience):
		s.t.Fatalf("no response within %v", patience)
	}
	return nil
}

// none asserts that no response arrives within d.
func (s *stream[Req, Resp]) none(d time.Duration) {
	s.t.Helper()
	select {
	case r, ok := <-s.resp:
		if ok {
			s.t.Fatalf("unexpected response %v", r)
		}
	case <-time.After(d):
	}
}

var envoyNode = &corev3.Node{Id: "envoy-1", Cluster: "test", UserAgentName: "envoy"}
var grpcNode = &corev3.Node{Id: "grpc-1", Cluster: "test", UserAgentName: "gRPC Go"}

func req(typ string, names ...string) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNames: names}
}

// ack builds the ACK of r with the given subscription.
func ack(r *discoveryv3.DiscoveryResponse, names ...string) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: names}
}

// names returns the sorted resource names of a SotW response.
func names(t testing.TB, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		switch a.TypeUrl {
		case ClusterType:
			var m clusterv3.Cluster
			if err := a.UnmarshalTo(&m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Name)
		case EndpointType:
			var m endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.ClusterName)
		default:
			out = append(out, a.TypeUrl)
		}
	}
	sort.Strings(out)
	return out
}

func deltaNames(r *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, x := range r.Resources {
		out = append(out, x.Name)
	}
	sort.Strings(out)
	return out
}

func wantNames(t testing.TB, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got names %v, want %v", got, want)
	}
}

func deltaReq(typ string, sub ...string) *discoveryv3.DeltaDiscoveryRequest {
	return &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: typ, ResourceNamesSubscribe: sub}
}

// owed takes what the client is owed now, as its writer would (nil:
// nothing, and then the slots it let go of are released, as its writer
// would).
func owed(c *client) *outbound {
	c.mu.Lock()
	o, _ := c.next(time.Now())
	c.mu.Unlock()
	if o == nil {
		c.s.orphans.reap(&c.s.mu)
	}
	return o
}

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = svcName(i)
	}
	return out
}
