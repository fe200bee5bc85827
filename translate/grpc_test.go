package translate_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// TestGRPCClientAcceptsChain serves one translated service to grpc-go's own
// xDS client (through go-control-plane's stock server, so that only the
// resources are under test) and checks that RPCs reach exactly the backends
// gRPC should use: the HEALTHY and UNKNOWN endpoints of the lowest priority,
// not the UNHEALTHY one nor the failover tier.
func TestGRPCClientAcceptsChain(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var addrs []string
	for range 4 {
		addr, stop := backend(t)
		defer stop()
		addrs = append(addrs, addr)
	}
	svc := sources.Service{Name: "greeter"}
	for i, h := range []sources.Health{sources.HealthHealthy, sources.HealthUnknown, sources.HealthUnhealthy, sources.HealthHealthy} {
		host, port := splitHostPort(t, addrs[i])
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
			Address: host, Port: port, Health: h, Weight: uint32(i),
			Priority: map[bool]uint32{true: 20, false: 10}[i == 3], // the last is failover only
			Locality: sources.Locality{Region: "r", Zone: fmt.Sprint("z", i%2)},
			Metadata: map[string]string{"backend": fmt.Sprint(i)},
		})
	}
	r, err := translate.Service(svc, translate.Options{GRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType:  {r.Cluster},
		resourcev3.EndpointType: {r.Assignment},
		resourcev3.ListenerType: {r.Listener},
		resourcev3.RouteType:    {r.Route},
	})
	if err != nil {
		t.Fatal(err)
	}
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	if err := cache.SetSnapshot(ctx, "test-client", snap); err != nil {
		t.Fatal(err)
	}
	srvCtx, srvCancel := context.WithCancel(ctx)
	defer srvCancel()
	xdsSrv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(xdsSrv, serverv3.NewServer(srvCtx, cache, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = xdsSrv.Serve(lis) }()
	defer xdsSrv.Stop()

	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "test-client"}
	}`, lis.Addr().String())
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	hits := map[string]int{}
	client := healthpb.NewHealthClient(conn)
	for range 30 {
		var p peer.Peer
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
			t.Fatalf("RPC through xds:///greeter: %v", err)
		}
		hits[p.Addr.String()]++
	}
	for i, addr := range addrs {
		if want := i < 2; (hits[addr] > 0) != want {
			t.Errorf("backend %d (%s, %v) got %d RPCs; want traffic: %v", i, addr, svc.Endpoints[i].Health, hits[addr], want)
		}
	}
}

// backend starts a gRPC server with the health service on loopback.
func backend(t *testing.T) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	return lis.Addr().String(), s.Stop
}

func splitHostPort(t *testing.T, addr string) (string, uint32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var p uint32
	if _, err := fmt.Sscan(port, &p); err != nil {
		t.Fatal(err)
	}
	return host, p
}
