package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/replicas"
)

// runReplicas runs the replicas scenario once per max_connection_age given.
func runReplicas(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("replicas", flag.ContinueOnError)
	out := fs.String("out", "out/bench/replicas", "output directory")
	var cfg replicas.Config
	fs.StringVar(&cfg.ConsulBin, "consul", defaultConsulBin(), "consul binary (env XDSBRIDGE_CONSUL)")
	fs.StringVar(&cfg.BridgeBin, "bridge", "out/bench/bridge", "bridge binary (go build -o out/bench/bridge ./cmd/bridge)")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "bridge replicas, each on a Consul client agent of its own")
	fs.IntVar(&cfg.Clients, "c", 3000, "delta clients behind the balancer")
	fs.IntVar(&cfg.Services, "n", 1000, "services (3 instances each)")
	fs.Float64Var(&cfg.Rate, "rate", 5, "changes per second (an instance of a random service re-registered on a new port)")
	fs.DurationVar(&cfg.Quiet, "quiet", time.Minute, "a service changed is not changed again for this long")
	fs.DurationVar(&cfg.Reads, "reads", time.Minute, "churn with one replica, counting the Consul server's reads")
	fs.DurationVar(&cfg.Idle, "idle", 30*time.Second, "count the server's reads this long with nothing changing, before each churn they are counted in")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Minute, "churn with every replica up before the kill")
	fs.DurationVar(&cfg.After, "after", time.Minute, "churn after every moved client is current, before the restart")
	fs.DurationVar(&cfg.Spread, "spread", 3*time.Minute, "churn after the restart, following the clients per replica")
	fs.StringVar(&cfg.Balancer, "balancer", "proxy", "proxy: a TCP balancer process in between (its CPU reported); client: each client picks the next ready replica for every new connection (as Envoy balances its xDS cluster)")
	fs.BoolVar(&cfg.TLS, "tls", true, "replicas read their agents over HTTPS (HTTP/2: a watch per service); false: plain HTTP")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "bound of each wait")
	ages := fs.String("max-connection-age", "0,1m", "the replicas' xds.keepalive.max_connection_age, a run for each (0: the default, left out)")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	if cfg.Self, err = os.Executable(); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "command: xdsload replicas %s\n\n", shellJoin(args))
	for a := range strings.SplitSeq(*ages, ",") {
		age, err := time.ParseDuration(a)
		if err != nil {
			return fmt.Errorf("--max-connection-age: %w", err)
		}
		c := cfg
		c.MaxConnectionAge = age
		name := "age-default"
		if age > 0 {
			name = "age-" + a
		}
		c.OutDir = filepath.Join(abs, name)
		if err := os.MkdirAll(c.OutDir, 0o755); err != nil {
			return err
		}
		c.Logger = log.With("variant", name)
		log.Info("replicas scenario", "variant", name, "replicas", c.Replicas, "clients", c.Clients, "services", c.Services)
		r, err := replicas.Run(ctx, c)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(&md, "## %s\n\n%s\n%s\n", name, r.Targets(), r.Markdown())
		js, err := json.MarshalIndent(r, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.OutDir, "result.json"), js, 0o644); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(c.OutDir, "spread.csv"))
		if err != nil {
			return err
		}
		err = r.SpreadCSV(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		// Each variant's report is written as soon as it is done.
		if err := os.WriteFile(filepath.Join(abs, "results.md"), []byte(md.String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Println(md.String())
	return nil
}
