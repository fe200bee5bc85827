package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/replicas"
)

// balance runs the replicas scenario's TCP balancer (started by
// `xdsload replicas`): it prints READY once it listens, then a line per
// proxied connection opened or closed (replicas.BalancerEvent).
func balance(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("balance", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	backends := fs.String("backends", "", "comma-separated ADDR=READY_URL (or ADDR alone: always ready)")
	if err := fs.Parse(args); err != nil || *backends == "" {
		return errUsage
	}
	b := &replicas.Balancer{}
	for s := range strings.SplitSeq(*backends, ",") {
		addr, url, _ := strings.Cut(s, "=")
		be := replicas.Backend{Addr: addr}
		if url != "" {
			be.Ready = replicas.ReadinessProbe(ctx, url, 250*time.Millisecond)
		}
		b.Backends = append(b.Backends, be)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	w := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	line := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, s)
		w.Flush()
	}
	b.Event = func(e replicas.BalancerEvent) { line(e.String()) }
	line("READY")
	return b.Serve(ctx, ln)
}
