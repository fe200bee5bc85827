package xds_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
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

func web(ports ...uint32) sources.Service {
	svc := sources.Service{Name: "web"}
	for _, p := range ports {
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{Address: "127.0.0.1", Port: p, Health: sources.HealthHealthy})
	}
	return svc
}

// TestGRPCClient runs grpc-go's own xDS client against the engine: RPCs to
// xds:///web reach the backends; a removed backend stops getting traffic,
// an added one starts.
func TestGRPCClient(t *testing.T) {
	// patience bounds each wait for the client to act on what it was
	// sent: a failure detector, not a measurement, that a loaded machine
	// must never reach.
	const patience = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
	defer cancel()

	addrs, ports := grpcxdstest.Backends(t, 3)

	s := xds.NewServer(xds.Options{UnknownNameWait: time.Second})
	xdsAddr := grpcxdstest.Serve(t, s.Register)

	// Other services too, so that the client's named CDS/LDS requests are a
	// strict subset of what the server has, which go-control-plane's
	// SnapshotCache never answers in ADS mode.
	up := resources(t, web(ports[0], ports[1]))
	for i := range 20 {
		up = append(up, resources(t, sources.Service{Name: fmt.Sprint("other-", i),
			Endpoints: []sources.Endpoint{{Address: "127.0.0.1", Port: 1, Health: sources.HealthHealthy}}})...)
	}
	s.Apply(up, nil)

	client := grpcxdstest.Dial(t, xdsAddr, "grpc-test", "web")

	// eventually polls until cond holds for a batch of RPCs, failing
	// after patience; it logs how long that took.
	eventually := func(what string, cond func(map[string]int) bool) {
		t.Helper()
		start := time.Now()
		for {
			hits := client.Hits(ctx, 20)
			if cond(hits) {
				t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > patience {
				t.Fatalf("%s: not within %v (last batch %v)", what, patience, hits)
			}
		}
	}

	eventually("traffic on both backends", func(h map[string]int) bool {
		return h[addrs[0]] > 0 && h[addrs[1]] > 0 && h[addrs[2]] == 0
	})

	s.Apply(resources(t, web(ports[0])), nil)
	eventually("removed backend drained", func(h map[string]int) bool {
		return h[addrs[1]] == 0 && h[addrs[0]] == 20
	})

	s.Apply(resources(t, web(ports[0], ports[2])), nil)
	eventually("added backend serving", func(h map[string]int) bool {
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
