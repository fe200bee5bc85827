// Command edge is the benchmark of an edge Envoy fleet that takes its whole
// configuration from the bridge: C Envoy-like clients holding a listener,
// its route configuration and its certificate beside N clusters and their
// assignments, against the same fleet holding clusters and assignments
// only.
//
// The bridge binary serves a services file (the file source, default
// settings) of N services of E endpoints. In the "edge" variant its
// configuration adds a route configuration with a virtual host per
// service ({service}.example.com), an HTTPS listener taking it by RDS and
// its certificate by SDS, and that certificate from PEM files granted to
// the fleet's scope; the clients (test/envoysim in Light mode, with
// Listeners: an Envoy whose bootstrap names only the bridge) subscribe to
// every listener and follow it to its route configuration and secret. In
// the "cds-eds" variant the configuration has none of those sections and
// the clients subscribe to clusters and assignments only: what every
// Envoy of the fleet read before.
//
// Each run measures, one change at a time (the next once every client
// holds the last):
//   - endpoint changes: one endpoint's weight edited in the services file;
//   - route changes (edge): a route tag (urlprefix-/rK) set on one service;
//   - certificate rotations (edge): a new certificate and key written over
//     the files (a new file renamed over each, as a rotation tool does).
//
// For each kind: the bridge's CPU per client·change (utime+stime from
// /proc/PID/stat over the whole series, divided by changes × clients),
// the load generator's (this process's) likewise, the latency from the
// write to each client holding the change (p99 over every client of every
// change), and the bytes of the responses received per client·change. The
// 1-minute load average is recorded at the start and the end of each run:
// the machine is shared, and latencies depend on it where CPU time
// hardly does. The two variants alternate within each run, so that both
// see the same load; the summary takes the median of each figure over
// the runs.
//
//	go run ./bench/edge --bridge out/bench/bridge --runs 3 --out out/bench/edge
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config is the benchmark's flags.
type config struct {
	bridge, out                   string
	runs, clients, services, eps  int
	endpointChanges, routeChanges int
	rotations                     int
	delta, heapProfile            bool
	timeout                       time.Duration
	variants                      []string
}

func main() {
	var cfg config
	var sotw bool
	flag.StringVar(&cfg.bridge, "bridge", "out/bench/bridge", "the bridge binary (go build -o out/bench/bridge ./cmd/bridge)")
	flag.StringVar(&cfg.out, "out", "out/bench/edge", "directory of the raw results, the bridge's logs and the summary")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of both variants; the summary takes the median of each figure")
	flag.IntVar(&cfg.clients, "c", 1000, "clients")
	flag.IntVar(&cfg.services, "n", 1000, "services (clusters)")
	flag.IntVar(&cfg.eps, "e", 10, "endpoints per service")
	flag.IntVar(&cfg.endpointChanges, "endpoint-changes", 20, "sequential endpoint changes per run")
	flag.IntVar(&cfg.routeChanges, "route-changes", 10, "sequential route changes per run (edge variant)")
	flag.IntVar(&cfg.rotations, "rotations", 5, "sequential certificate rotations per run (edge variant)")
	flag.BoolVar(&sotw, "sotw", false, "State-of-the-World ADS instead of delta ADS")
	flag.BoolVar(&cfg.heapProfile, "heap-profile", false, "turn on the bridge's profiler and save its heap profile once every client holds everything (run-R-VARIANT.heap.pprof)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "bound of the cold start and of each change")
	flag.Parse()
	cfg.delta = !sotw
	cfg.variants = []string{variantCDSEDS, variantEdge}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var all []result
	for r := 1; r <= cfg.runs; r++ {
		for _, v := range cfg.variants {
			log.Info("run", "run", r, "of", cfg.runs, "variant", v, "delta", cfg.delta)
			res, err := runOnce(ctx, cfg, v, r, log)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r, v, err)
			}
			all = append(all, res)
			b, _ := json.MarshalIndent(res, "", "  ")
			name := fmt.Sprintf("run-%d-%s.json", r, v)
			if err := os.WriteFile(filepath.Join(cfg.out, name), append(b, '\n'), 0o644); err != nil {
				return err
			}
			if res.Problem != "" {
				return fmt.Errorf("run %d, %s: %s", r, v, res.Problem)
			}
		}
	}
	table := summarize(all, cfg)
	fmt.Print(table)
	return os.WriteFile(filepath.Join(cfg.out, "summary.md"), []byte(table), 0o644)
}
