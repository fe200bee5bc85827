package xds_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	grpcxds "google.golang.org/grpc/xds" // registers the xds resolver and balancers

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// resources translates svc (with the proxyless chain, gRPC-only) into
// upserts for the engine.
func resources(t *testing.T, svc sources.Service) []xds.Resource {
	t.Helper()
	r, err := translate.Service(svc, translate.Options{GRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	return []xds.Resource{
		{Type: xds.ClusterType, Name: svc.Name, Message: r.Cluster},
		{Type: xds.EndpointType, Name: svc.Name, Message: r.Assignment},
		{Type: xds.ListenerType, Name: svc.Name, Message: r.Listener, GRPCOnly: true},
		{Type: xds.RouteType, Name: svc.Name, Message: r.Route, GRPCOnly: true},
	}
}

func backend(t *testing.T) (addr string, port uint32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	_, p, _ := net.SplitHostPort(lis.Addr().String())
	n, _ := strconv.Atoi(p)
	return lis.Addr().String(), uint32(n)
}

func web(ports ...uint32) sources.Service {
	svc := sources.Service{Name: "web"}
	for _, p := range ports {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{Address: "127.0.0.1", Port: p, Health: sources.HealthHealthy})
	}
	return svc
}

// TestGRPCClient is acceptance 6 against grpc-go's own xDS client: RPCs to
// xds:///web reach the backends; a removed backend stops getting traffic
// within 2s, an added one starts.
func TestGRPCClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var addrs []string
	var ports []uint32
	for range 3 {
		a, p := backend(t)
		addrs, ports = append(addrs, a), append(ports, p)
	}

	s := xds.NewServer(xds.Options{UnknownNameWait: time.Second})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()

	// Other services too, so that the client's named CDS/LDS requests are a
	// strict subset of what the server has (XDS.md: SnapshotCache never
	// answers those in ADS mode).
	up := resources(t, web(ports[0], ports[1]))
	for i := range 20 {
		up = append(up, resources(t, sources.Service{Name: fmt.Sprint("other-", i),
			Endpoints: []sources.Endpoint{{Address: "127.0.0.1", Port: 1, Health: sources.HealthHealthy}}})...)
	}
	s.Apply(up, nil)

	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "grpc-test"}
	}`, lis.Addr().String())
	resolver, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///web", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	// rpcs makes n RPCs and counts them per backend.
	rpcs := func(n int) map[string]int {
		hits := map[string]int{}
		for range n {
			var p peer.Peer
			if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
				t.Fatalf("RPC through xds:///web: %v", err)
			}
			hits[p.Addr.String()]++
		}
		return hits
	}
	// within polls until cond holds for a batch of RPCs, failing after d.
	within := func(what string, d time.Duration, cond func(map[string]int) bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			hits := rpcs(20)
			if cond(hits) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v (last batch %v)", what, d, hits)
			}
		}
	}

	within("traffic on both backends", 15*time.Second, func(h map[string]int) bool {
		return h[addrs[0]] > 0 && h[addrs[1]] > 0 && h[addrs[2]] == 0
	})

	s.Apply(resources(t, web(ports[0])), nil)
	within("removed backend drained", 2*time.Second, func(h map[string]int) bool {
		return h[addrs[1]] == 0 && h[addrs[0]] == 20
	})

	s.Apply(resources(t, web(ports[0], ports[2])), nil)
	within("added backend serving", 2*time.Second, func(h map[string]int) bool {
		return h[addrs[2]] > 0
	})

	cs := s.Clients()
	if len(cs) != 1 || !cs[0].GRPC {
		t.Fatalf("clients %+v: want one gRPC client", cs)
	}
	for _, ts := range cs[0].Types {
		if ts.NACK != nil {
			t.Errorf("%s NACKed: %+v", ts.TypeURL, ts.NACK)
		}
		if ts.Subscribed != 1 {
			t.Errorf("%s: %d names subscribed, want 1", ts.TypeURL, ts.Subscribed)
		}
	}
}
