// Package grpcxdstest drives grpc-go's own xDS client in tests: health-service
// backends on loopback, a client channel bootstrapped against an xDS server,
// and RPCs counted per backend, so a test can check where traffic goes.
package grpcxdstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds" // registers the xds resolver and balancers
)

// Serve starts a gRPC server with opts and the services register adds on
// a loopback port, stopped when the test ends, and returns its address.
func Serve(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}

// Backend serves the health service (see Serve) and returns its address
// and port.
func Backend(t testing.TB) (addr string, port uint32) {
	t.Helper()
	addr = Serve(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return addr, uint32(n)
}

// Backends starts n backends (see Backend) and returns their addresses and
// ports, in the same order.
func Backends(t testing.TB, n int) (addrs []string, ports []uint32) {
	t.Helper()
	for range n {
		a, p := Backend(t)
		addrs, ports = append(addrs, a), append(ports, p)
	}
	return addrs, ports
}

// Client is a channel to xds:///<service> resolved through grpc-go's xDS
// client, bootstrapped against the server at xdsAddr as node nodeID.
type Client struct {
	t      testing.TB
	target string
	health healthpb.HealthClient
}

// Dial opens the channel over plaintext; it is closed when the test ends.
func Dial(t testing.TB, xdsAddr, nodeID, service string) *Client {
	t.Helper()
	return DialCreds(t, xdsAddr, nodeID, service, `{"type": "insecure"}`)
}

// TLSCreds returns the bootstrap channel_creds entry for TLS to the xDS
// server: the CA file to verify it against and, unless empty, the client
// certificate pair to present (grpc-go re-reads the files every
// refreshInterval, "1s" say).
func TLSCreds(caFile, certFile, keyFile, refreshInterval string) string {
	return fmt.Sprintf(`{"type": "tls", "config": {"ca_certificate_file": %q, "certificate_file": %q, "private_key_file": %q, "refresh_interval": %q}}`,
		caFile, certFile, keyFile, refreshInterval)
}

// DialCreds is Dial with the bootstrap's channel_creds entry given, such as
// TLSCreds returns.
func DialCreds(t testing.TB, xdsAddr, nodeID, service, channelCreds string) *Client {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [%s], "server_features": ["xds_v3"]}],
		"node": {"id": %q}
	}`, xdsAddr, channelCreds, nodeID)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	target := "xds:///" + service
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Client{t: t, target: target, health: healthpb.NewHealthClient(conn)}
}

// Hits makes n health RPCs, each waiting for the channel to be ready, and
// counts them per backend address. An RPC error fails the test.
func (c *Client) Hits(ctx context.Context, n int) map[string]int {
	c.t.Helper()
	return c.HitsUntil(ctx, n, func(map[string]int) bool { return false })
}

// HitsUntil makes health RPCs as Hits does until done(hits) holds or n
// RPCs were made, and returns the hits. A balancer spreads calls only over
// the backends it has connected to, which on a loaded machine may be one
// of several for a while: a test that wants every backend to take traffic
// waits for it this way, bounded by n, rather than counting on n calls to
// spread.
func (c *Client) HitsUntil(ctx context.Context, n int, done func(hits map[string]int) bool) map[string]int {
	c.t.Helper()
	hits := map[string]int{}
	for range n {
		if done(hits) {
			break
		}
		var p peer.Peer
		if _, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
			c.t.Fatalf("RPC through %s: %v", c.target, err)
		}
		hits[p.Addr.String()]++
	}
	return hits
}

// Try makes one health RPC, waiting for the channel to be ready until ctx
// ends, and returns its error: for tests where the channel is expected not
// to become ready (a resource the xDS client rejects).
func (c *Client) Try(ctx context.Context) error {
	_, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	return err
}
