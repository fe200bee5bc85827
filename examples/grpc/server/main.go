// Command server is one backend of the proxyless gRPC example: a plain gRPC
// server (no xDS on the server side) that serves the standard health
// service, grpc.health.v1.Health, and names itself in the response header
// "backend" of every call, so that the example client can print which
// backend answered. Run one per port:
//
//	go run ./examples/grpc/server --listen 127.0.0.1:50051 --name a
//
// The health service needs no generated code of the example's own; any
// unary service would do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// BackendHeader is the response header that carries the backend's name.
const BackendHeader = "backend"

func main() {
	listen := flag.String("listen", "127.0.0.1:50051", "address to serve on (port 0: any free port)")
	name := flag.String("name", "", "the name this backend answers with (default: its address)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *listen, *name); err != nil {
		log.Error("server failed", "err", err)
		os.Exit(1)
	}
}

// run serves on addr until ctx ends, then stops gracefully.
func run(ctx context.Context, log *slog.Logger, addr, name string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	if name == "" {
		name = lis.Addr().String()
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(nameAnswers(name)))
	healthpb.RegisterHealthServer(s, health.NewServer())
	// The address logged is the one bound, so that a caller that asked for
	// port 0 learns the port to list in the services file.
	log.Info("serving", "backend", name, "addr", lis.Addr().String())
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.GracefulStop()
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("stopped", "backend", name)
	return nil
}

// nameAnswers returns an interceptor that puts the backend's name in the
// response header of every unary call.
func nameAnswers(name string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handle grpc.UnaryHandler) (any, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs(BackendHeader, name)); err != nil {
			return nil, fmt.Errorf("setting the backend header: %w", err)
		}
		return handle(ctx, req)
	}
}
