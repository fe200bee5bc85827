package xds

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// withGRPCVariant returns c with a gRPC variant whose connect timeout is
// grpcTimeout, so that the two are told apart on the wire.
func withGRPCVariant(c Resource, grpcTimeout time.Duration) Resource {
	v := cluster(c.Name, grpcTimeout)
	c.GRPC = v.Message
	return c
}

func connectTimeout(t *testing.T, r *discoveryv3.DiscoveryResponse) time.Duration {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("got %d resources, want 1", len(r.Resources))
	}
	var c clusterv3.Cluster
	if err := r.Resources[0].UnmarshalTo(&c); err != nil {
		t.Fatal(err)
	}
	return c.GetConnectTimeout().AsDuration()
}

func TestGRPCVariant(t *testing.T) {
	s := NewServer(Options{})
	cc := serve(t, s)
	s.Apply([]Resource{withGRPCVariant(cluster("svc", time.Second), 2*time.Second)}, nil)

	envoy := openADS(t, cc)
	envoy.send(req(ClusterType, "svc"))
	er := envoy.recv()
	envoy.send(ack(er, "svc"))
	grpcc := openADS(t, cc)
	gq := req(ClusterType, "svc")
	gq.Node = grpcNode
	grpcc.send(gq)
	gr := grpcc.recv()
	grpcc.send(ack(gr, "svc"))
	if got := connectTimeout(t, er); got != time.Second {
		t.Errorf("envoy got connect timeout %s, want the main message's 1s", got)
	}
	if got := connectTimeout(t, gr); got != 2*time.Second {
		t.Errorf("grpc got connect timeout %s, want the variant's 2s", got)
	}

	// A change of the variant alone reaches the gRPC client; the Envoy gets
	// nothing new.
	s.Apply([]Resource{withGRPCVariant(cluster("svc", time.Second), 3*time.Second)}, nil)
	if got := connectTimeout(t, grpcc.recv()); got != 3*time.Second {
		t.Errorf("grpc got connect timeout %s after the change, want 3s", got)
	}
	envoy.none(100 * time.Millisecond)

	// Dropping the variant sends the main message to the gRPC client.
	s.Apply([]Resource{cluster("svc", time.Second)}, nil)
	if got := connectTimeout(t, grpcc.recv()); got != time.Second {
		t.Errorf("grpc got connect timeout %s without a variant, want 1s", got)
	}
}

func TestResourceFor(t *testing.T) {
	base, variant := cluster("svc", time.Second), cluster("svc", 2*time.Second)
	r := withGRPCVariant(base, 2*time.Second)
	if m, ok := r.For(false); !ok || !proto.Equal(m, base.Message) {
		t.Errorf("For(envoy) = %v, %t; want the main message", m, ok)
	}
	if m, ok := r.For(true); !ok || !proto.Equal(m, variant.Message) {
		t.Errorf("For(grpc) = %v, %t; want the variant", m, ok)
	}
	if _, ok := listener("l").For(false); ok {
		t.Error("a gRPC-only resource is visible to Envoy")
	}
}
