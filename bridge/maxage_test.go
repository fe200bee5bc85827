package bridge_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
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
	// The deadline only bounds a failure: a stream the age does not end
	// runs until it, and the test says so.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// On a loaded machine the connection may already be over: Send then
	// reports io.EOF and Recv the stream's end.
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "aging"},
		TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	start := time.Now()
	for err = nil; err == nil; {
		_, err = st.Recv()
	}
	if ctx.Err() != nil {
		t.Fatal("the stream outlived its connection's max age and grace")
	}
	// grpc-go's server tells the client why in its GOAWAY frame.
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "max_age") {
		t.Errorf("the stream ended with %v, want Unavailable after a max_age GOAWAY", err)
	}
	t.Logf("the stream ended %v after its first request (age 300ms ±10%%, grace 200ms)", time.Since(start).Round(time.Millisecond))
}
