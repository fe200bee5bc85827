package translate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/translate"
)

// TestGRPCClientAcceptsChain serves one translated service to grpc-go's own
// xDS client (through go-control-plane's stock server, so that only the
// resources are under test) and checks that RPCs reach exactly the backends
// gRPC should use: the HEALTHY and UNKNOWN endpoints of the lowest priority,
// not the UNHEALTHY one nor the failover tier.
func TestGRPCClientAcceptsChain(t *testing.T) {
	// Registered first, so it runs after the cleanups that stop the
	// backends and close the channel.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	addrs, ports := grpcxdstest.Backends(t, 4)
	svc := sources.Service{Name: "greeter"}
	for i, h := range []sources.Health{sources.HealthHealthy, sources.HealthUnknown, sources.HealthUnhealthy, sources.HealthHealthy} {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
			Address: "127.0.0.1", Port: ports[i], Health: h, Weight: uint32(i),
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
	xdsAddr := grpcxdstest.Serve(t, func(g *grpc.Server) {
		discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(srvCtx, cache, nil))
	})

	// Until both healthy backends took calls (the unhealthy one never
	// may), bounded.
	hits := grpcxdstest.Dial(t, xdsAddr, "test-client", "greeter").HitsUntil(ctx, 1000, func(h map[string]int) bool {
		return h[addrs[0]] > 0 && h[addrs[1]] > 0
	})
	for i, addr := range addrs {
		if want := i < 2; (hits[addr] > 0) != want {
			t.Errorf("backend %d (%s, %v) got %d RPCs; want traffic: %v", i, addr, svc.Endpoints[i].Health, hits[addr], want)
		}
	}
}
