package fleet

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// endingADS serves nothing and ends every delta stream once end is
// closed, as a server whose connections are lost during a cold start.
type endingADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	end chan struct{}
}

func (a endingADS) DeltaAggregatedResources(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	select {
	case <-a.end:
	case <-s.Context().Done():
	}
	return status.Error(codes.Unavailable, "connection lost")
}

// TestColdStartEndsWhenAStreamIsLost checks that a cold start whose
// clients lost their streams ends without waiting for its bound, saying
// how many streams were lost and why: the clients do not reconnect, so
// waiting longer could not serve them.
func TestColdStartEndsWhenAStreamIsLost(t *testing.T) {
	g := grpc.NewServer()
	ads := endingADS{end: make(chan struct{})}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, ads)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-done })

	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Patience)
	defer cancel()
	f, err := StartLoad(ctx, LoadOptions{Addr: lis.Addr().String(), Spec: workload.Spec{Services: 2, Endpoints: 1},
		Clients: 3, Delta: true, Prefix: "envoy"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	close(ads.end)
	testwait.Eventually(t, testwait.Patience, "every client's stream to end", func() bool {
		for _, c := range f.Clients {
			if c.Err() == nil {
				return false
			}
		}
		return true
	})
	start := time.Now()
	_, err = f.WaitServed(ctx, testwait.Patience)
	t.Logf("after %s: %v", time.Since(start), err)
	if !errors.Is(err, errStreamLost) {
		t.Fatalf("waitServed: %v, want the lost streams", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "0 of 3 clients served; 3 streams lost (3: ") || !strings.Contains(msg, "connection lost") {
		t.Errorf("waitServed's error %q does not count the 3 lost streams and their reason", msg)
	}
}
