package bridge_test

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
)

// TestMaxConnectionAge checks that a connection older than
// xds.keepalive.max_connection_age is closed once its grace is over, so
// that clients reconnect (and rebalance).
func TestMaxConnectionAge(t *testing.T) {
	in := bridgetest.Start(t, `
xds: {listen: 127.0.0.1:0, keepalive: {max_connection_age: 300ms, max_connection_age_grace: 200ms}}
admin: {listen: 127.0.0.1:0}
sources: [{name: empty, type: file, path: /dev/null}]
`)
	conn, err := grpc.NewClient(in.XDSAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "aging"},
		TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	// 300ms ±10 % jitter, plus the grace; far below the 10s deadline.
	if took := time.Since(start); took > 3*time.Second || ctx.Err() != nil {
		t.Errorf("the stream ended after %v, want about 0.5s", took)
	}
}
