package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/consul"
)

// defaultConsulBin is $XDSBRIDGE_CONSUL, else the binary scripts/tools.sh
// caches.
func defaultConsulBin() string {
	if p := os.Getenv("XDSBRIDGE_CONSUL"); p != "" {
		return p
	}
	cache := os.Getenv("XDSBRIDGE_CACHE")
	if cache == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(dir, "xdsbridge")
		}
	}
	return filepath.Join(cache, "bin", "consul-1.14.11")
}

// parseOut parses the flags and creates the output directory out (its
// value after parsing); it returns its absolute path.
func parseOut(fs *flag.FlagSet, args []string, out *string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", errUsage
	}
	abs, err := filepath.Abs(*out)
	if err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}

// consulEvents runs the Consul source's scenario: every kind of registry
// change timed until every client has it, under churn, with the reads
// that reach the Consul server counted.
func consulEvents(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("consul-events", flag.ContinueOnError)
	out := fs.String("out", "out/bench/consul-events", "output directory")
	var cfg consul.EventsConfig
	binaryFlags(fs, &cfg.ConsulBin, &cfg.BridgeBin)
	fs.StringVar(&cfg.Topology, "topology", "cluster", "cluster (a server agent and a client agent; the bridge reads the client) or dev")
	fs.IntVar(&cfg.Clients, "c", 100, "delta clients")
	fs.IntVar(&cfg.Services, "n", 10000, "services (3 instances each: 2 with passing TTL checks, 1 without)")
	fs.Float64Var(&cfg.Churn, "churn", 20, "unrelated registrations per second")
	fs.IntVar(&cfg.PerEvent, "per-event", 10, "repetitions of each kind of change")
	fs.StringVar(&cfg.SourceYAML, "source", "", `extra keys of the consul source, flow style ("sweep_cached: false")`)
	fs.DurationVar(&cfg.Timeout, "timeout", 15*time.Second, "bound of the wait for one change")
	fs.BoolVar(&cfg.TLS, "tls", false, "give the agents an HTTPS port (certificate for 127.0.0.1 from a CA made for the run) and point the bridge at it")
	fs.StringVar(&cfg.AgentHCL, "agent-hcl", "", `configuration both agents get ("limits { http_max_conns_per_client = 40 }")`)
	fs.DurationVar(&cfg.Idle, "idle", 30*time.Second, "count the server's reads this long with nothing changing, before the churn (0: skip)")
	fs.DurationVar(&cfg.Baseline, "baseline", 20*time.Second, "run the churn this long before the bridge starts, to measure the agents' CPU without it (0: skip)")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	cfg.OutDir = abs
	cfg.Logger = log
	log.Info("consul events scenario", "topology", cfg.Topology, "services", cfg.Services, "clients", cfg.Clients, "tls", cfg.TLS)
	r, err := consul.RunEvents(ctx, cfg)
	if err != nil {
		return err
	}
	return writeResults(abs, "consul-events", args, r.Markdown())
}

// binaryFlags adds the flags naming the Consul and bridge binaries a
// Consul scenario runs.
func binaryFlags(fs *flag.FlagSet, consulBin, bridgeBin *string) {
	fs.StringVar(consulBin, "consul", defaultConsulBin(), "consul binary (env XDSBRIDGE_CONSUL)")
	fs.StringVar(bridgeBin, "bridge", "out/bench/bridge", "bridge binary (go build -o out/bench/bridge ./cmd/bridge)")
}

// writeResults prints a scenario's results, headed by its command line,
// and writes them to results.md in dir.
func writeResults(dir, scenario string, args []string, markdown string) error {
	md := "command: xdsload " + scenario + " " + shellJoin(args) + "\n\n" + markdown
	fmt.Println(md)
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644)
}

// shellJoin quotes the arguments for a POSIX shell where they need it, so
// that the command line in the results can be run again as it is.
func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'{}$*?[]|&;<>()\\`#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
