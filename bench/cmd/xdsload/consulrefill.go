package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/consul"
)

// consulRefill runs the scenario of a Consul agent restarted on an empty
// data directory and refilled: the endpoints clients were ever without,
// and when the services that never came back were removed.
func consulRefill(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("consul-refill", flag.ContinueOnError)
	out := fs.String("out", "out/bench/consul-refill", "output directory")
	var cfg consul.RefillConfig
	binaryFlags(fs, &cfg.ConsulBin, &cfg.BridgeBin)
	fs.IntVar(&cfg.Services, "n", 200, "services")
	fs.IntVar(&cfg.Instances, "instances", 2, "instances per service")
	fs.IntVar(&cfg.Gone, "gone", 20, "services not registered again after the restart")
	fs.DurationVar(&cfg.Refill, "refill", 20*time.Second, "how long the registrations after the restart take, evenly spread")
	fs.IntVar(&cfg.Clients, "c", 10, "delta clients")
	fs.StringVar(&cfg.SourceYAML, "source", "", `extra keys of the consul source, flow style`)
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound of the wait for the gone services' removal after the refill")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	cfg.OutDir, cfg.Logger = abs, log
	log.Info("consul refill scenario", "services", cfg.Services, "gone", cfg.Gone, "refill", cfg.Refill)
	r, err := consul.RunRefill(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeResults(abs, "consul-refill", args, r.Markdown()); err != nil {
		return err
	}
	if r.Missing > 0 || r.GoneMissed {
		return fmt.Errorf("consul refill scenario FAILED: %d endpoints missing, gone services removed: %v", r.Missing, !r.GoneMissed)
	}
	return nil
}
