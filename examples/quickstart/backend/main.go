// Command backend stands in for the quick start's web service, so that an
// Envoy pointed at the bridge (examples/envoy/envoy.yaml) has something to
// route to: an HTTP server on each address given, answering every request
// with the address that served it. services.yaml puts web on
// 127.0.0.1:8081 and 127.0.0.1:8082:
//
//	go run ./examples/quickstart/backend 127.0.0.1:8081 127.0.0.1:8082
//
// It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: backend ADDRESS...  (e.g. 127.0.0.1:8081 127.0.0.1:8082)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, os.Args[1:]); err != nil {
		log.Error("backend", "err", err)
		os.Exit(1)
	}
}

// run serves every address until ctx is done.
func run(ctx context.Context, log *slog.Logger, addrs []string) error {
	var servers []*http.Server
	var lis []net.Listener
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, o := range lis {
				o.Close()
			}
			return err
		}
		lis = append(lis, l)
		addr := l.Addr().String()
		servers = append(servers, &http.Server{ReadHeaderTimeout: 5 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "web answered from %s (%s %s)\n", addr, r.Method, r.URL.Path)
			})})
		log.Info("serving", "addr", addr)
	}
	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := s.Serve(lis[i]); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		})
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	for _, s := range servers {
		_ = s.Close()
	}
	wg.Wait()
	return err
}
