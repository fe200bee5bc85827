// Command client is the proxyless gRPC client of the example: it dials
// xds:///greeter through grpc-go's own xDS client, bootstrapped from the
// file named by GRPC_XDS_BOOTSTRAP, calls the backends' health service
// once per interval and prints which backend answered each call:
//
//	GRPC_XDS_BOOTSTRAP=examples/grpc/bootstrap.json go run ./examples/grpc/client
//
// Every endpoint comes from the bridge (Listener, RouteConfiguration,
// Cluster and ClusterLoadAssignment of the service, over ADS), so an edit
// of the bridge's services file moves the calls with no restart.
//
// With --csds ADDR the client also serves grpc-go's Client Status
// Discovery Service on ADDR: every xDS resource its xDS client holds or
// asked for, with the version it ACKed, or the error it NACKed one with
// (grpcdebug reads it; so do the end-to-end tests). It logs the address it
// bound ("CSDS on 127.0.0.1:PORT") on stderr, so ADDR may use port 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	_ "google.golang.org/grpc/xds" // registers the xds:/// resolver and the xDS balancers
	"google.golang.org/grpc/xds/csds"
)

// backendHeader is the response header in which the example server names
// itself (examples/grpc/server).
const backendHeader = "backend"

func main() {
	target := flag.String("target", "xds:///greeter", "the channel's target")
	interval := flag.Duration("interval", 500*time.Millisecond, "pause between calls")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of one call, waiting for the channel included")
	count := flag.Int("count", 0, "stop after this many calls (0: until interrupted)")
	csdsAddr := flag.String("csds", "", "serve the Client Status Discovery Service on this address (empty: not at all)")
	flag.Parse()
	if strings.HasPrefix(*target, "xds:") && os.Getenv("GRPC_XDS_BOOTSTRAP") == "" && os.Getenv("GRPC_XDS_BOOTSTRAP_CONFIG") == "" {
		fmt.Fprintln(os.Stderr, "client: GRPC_XDS_BOOTSTRAP is not set: point it at a bootstrap file such as examples/grpc/bootstrap.json")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *csdsAddr != "" {
		stopCSDS, err := serveCSDS(*csdsAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		defer stopCSDS()
	}
	if err := run(ctx, os.Stdout, *target, *interval, *timeout, *count); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

// serveCSDS serves grpc-go's CSDS on addr and returns what stops it.
func serveCSDS(addr string) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving CSDS: %w", err)
	}
	cs, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("serving CSDS: %w", err)
	}
	s := grpc.NewServer()
	statusv3.RegisterClientStatusDiscoveryServiceServer(s, cs)
	go func() { _ = s.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "CSDS on %s\n", lis.Addr())
	return func() { s.Stop(); cs.Close() }, nil
}

// run calls target every interval until ctx ends or count calls are made,
// writing one line per call to out. A failed call is reported and the
// calls go on: a backend that goes away is the event the example shows.
func run(ctx context.Context, out io.Writer, target string, interval, timeout time.Duration, count int) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("creating the channel to %s: %w", target, err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; count == 0 || n <= count; n++ {
		backend, addr, err := call(ctx, health, timeout)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fmt.Fprintf(out, "call %d failed: %v\n", n, err)
		default:
			fmt.Fprintf(out, "call %d answered by %s (%s)\n", n, backend, addr)
		}
		if count != 0 && n == count {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// call makes one health call, waiting for the channel to become ready
// within timeout, and returns the name the backend gave and its address.
func call(ctx context.Context, health healthpb.HealthClient, timeout time.Duration) (backend, addr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var header metadata.MD
	var p peer.Peer
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
		return "", "", fmt.Errorf("calling grpc.health.v1.Health/Check: %w", err)
	}
	if p.Addr == nil {
		return "", "", errors.New("calling grpc.health.v1.Health/Check: no peer address")
	}
	backend = "(unnamed)"
	if v := header.Get(backendHeader); len(v) > 0 {
		backend = v[0]
	}
	return backend, p.Addr.String(), nil
}
