package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/istiod"
	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

// runIstiod runs the Istio serving scenario (istiod.Run): each shape's
// server in its own process, one istiod-like client, one instance change
// per second; --runs times each, then the medians.
func runIstiod(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("istiod", flag.ContinueOnError)
	out := fs.String("out", "out/bench/istiod", "output directory (results.md, the servers' logs)")
	impls := fs.String("impls", strings.Join(xdsserver.IstioImpls, ","), "shapes, as server implementations")
	var cfg istiod.Config
	fs.IntVar(&cfg.Services, "n", 10000, "services")
	fs.IntVar(&cfg.Instances, "e", 3, "instances per service")
	fs.Float64Var(&cfg.Rate, "rate", 1, "instance changes per second")
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "how long to apply changes")
	fs.DurationVar(&cfg.Idle, "idle", 10*time.Second, "read the server's CPU this long with nothing changing, before the changes (0: skip)")
	fs.DurationVar(&cfg.Holdoff, "holdoff", 0, "server-side coalescing of changes, as the bridge's source manager (0: each change applied at once)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound of the wait for one push (the initial sync: 5 times as long)")
	runs := fs.Int("runs", 3, "runs of each shape, one after the other")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own binary: %w", err)
	}
	cfg.Bin, cfg.OutDir, cfg.Logger = bin, abs, log
	var results []*istiod.Result
	var lines strings.Builder
	for rep := range *runs {
		for impl := range strings.SplitSeq(*impls, ",") {
			c := cfg
			c.Impl, c.Rep = impl, rep
			r, err := istiod.Run(ctx, c)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", impl, rep, err)
			}
			log.Info(r.Line())
			lines.WriteString("- " + r.Line() + "\n")
			results = append(results, r)
		}
	}
	md := fmt.Sprintf("%s\n\nRuns:\n\n%s\nMedians (range) over the runs:\n\n%s", machine(), lines.String(), istiod.Summary(results))
	if err := writeResults(abs, "istiod", args, md); err != nil {
		return err
	}
	for _, r := range results {
		if r.Problem != "" {
			return fmt.Errorf("a run FAILED: %s", r.Problem)
		}
	}
	return nil
}

// istiodConsul runs the Istio scenario end to end (istiod.RunConsul):
// a real Consul agent, the bridge binary, an istiod-like client, an
// instance registered and deregistered in turn.
func istiodConsul(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("istiod-consul", flag.ContinueOnError)
	out := fs.String("out", "out/bench/istiod-consul", "output directory")
	var cfg istiod.ConsulConfig
	binaryFlags(fs, &cfg.ConsulBin, &cfg.BridgeBin)
	fs.StringVar(&cfg.Topology, "topology", "cluster", "cluster (a server agent and a client agent; the bridge reads the client) or dev")
	fs.BoolVar(&cfg.TLS, "tls", true, "give the agents an HTTPS port (certificate for 127.0.0.1 from a CA made for the run) and point the bridge at it")
	fs.StringVar(&cfg.Shape, "shape", "inline", "the istio section's shape: inline or workload_entries")
	fs.IntVar(&cfg.Services, "n", 100, "services (3 instances each)")
	fs.IntVar(&cfg.Changes, "changes", 40, "changes: an instance registered, then deregistered, and so on")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "pause between a change's arrival and the next change")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound of the first sync and of the wait for one change")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	cfg.OutDir, cfg.Logger = abs, log
	r, err := istiod.RunConsul(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeResults(abs, "istiod-consul", args, machine()+"\n\n"+r.Markdown()); err != nil {
		return err
	}
	if r.Missed > 0 {
		return fmt.Errorf("%d of %d changes did not arrive within %v", r.Missed, cfg.Changes, cfg.Timeout)
	}
	return nil
}
