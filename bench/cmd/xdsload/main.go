// Command xdsload benchmarks xDS servers with a fleet of Envoy-like clients.
//
//	xdsload bench [--preset quick|full] [--scenarios S1,S2] [--impls ...] [--out out/bench]
//	xdsload run   --impl xdsbridge --delta -c 200 -n 1000 --changes 20
//	xdsload consul --bridge bin/bridge --consul $XDSBRIDGE_CONSUL -c 100 -n 100
//	xdsload file-source --bridge bin/bridge -n 1000,10000,100000 --edits 5
//	xdsload status-page --bridge old=bin/old,new=bin/bridge -n 10000 -c 1000
//	xdsload headline --svg docs/benchmarks-headline.svg docs/bench-results/full/xdsload.log
//	xdsload replicas --bridge bin/bridge --consul $XDSBRIDGE_CONSUL -c 3000 -n 1000
//	xdsload istiod -n 10000 -e 3 --rate 1 --duration 60s --runs 3
//	xdsload istiod-consul --bridge bin/bridge --consul $XDSBRIDGE_CONSUL -n 100 --changes 40
//	xdsload serve --impl snapshot     (started by bench and run; one server under test)
//
// See docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/consul"
	"github.com/xdsbridge/xdsbridge/bench/fanout"
	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsload:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

//lint:ignore ST1005 a usage line, printed alone; its trailing ellipsis stands for more arguments
var errUsage = errors.New("usage: xdsload bench|run|consul|consul-events|consul-refill|file-source|status-page|replicas|istiod|istiod-consul|serve [flags] (-h for flags), or xdsload summarize FILE.csv..., or xdsload headline [--svg FILE] RESULTS...") //nolint:staticcheck,revive // a usage line, printed alone (the lint:ignore above tells a standalone staticcheck)

// summarize prints the min/median/max tables of result CSVs (see
// fanout.Summarize); docs/benchmarks.md's tables are its output.
func summarize(files []string) error {
	if len(files) == 0 {
		return errUsage
	}
	var ins []io.Reader
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		ins = append(ins, f)
	}
	return fanout.Summarize(os.Stdout, ins...)
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], log)
	case "bench", "run":
		return benchmark(ctx, args[0], args[1:], log)
	case "consul":
		return runConsul(ctx, args[1:], log)
	case "summarize":
		return summarize(args[1:])
	case "headline":
		return headline(args[1:])
	case "consul-events":
		return consulEvents(ctx, args[1:], log)
	case "consul-refill":
		return consulRefill(ctx, args[1:], log)
	case "file-source":
		return fileSource(ctx, args[1:], log)
	case "status-page":
		return statusPage(ctx, args[1:], log)
	case "replicas":
		return runReplicas(ctx, args[1:], log)
	case "istiod":
		return runIstiod(ctx, args[1:], log)
	case "istiod-consul":
		return istiodConsul(ctx, args[1:], log)
	case "balance":
		return balance(ctx, args[1:])
	}
	return errUsage
}

func serve(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	impl := fs.String("impl", "xdsbridge", "implementation: "+strings.Join(slices.Concat(xdsserver.Impls, xdsserver.IstioImpls), ", "))
	xds := fs.String("xds", "127.0.0.1:0", "xDS listen address")
	control := fs.String("control", "127.0.0.1:0", "control API listen address")
	holdoff := fs.Duration("holdoff", 0, "coalesce changes as the bridge's source manager does (manager.Cadence: at most one publish per holdoff, no change waits longer); 0 applies each at once")
	maxHoldoff := fs.Duration("max-holdoff", 0, "bound of a change's wait with --holdoff, so only a bound of holdoff (default 10× holdoff)")
	streams := fs.Int("streams", 0, streamsUsage)
	buffers := fs.Int("grpc-buffers", 0, buffersUsage)
	kaTimeout := fs.Duration("keepalive-timeout", 0, keepaliveUsage)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	return xdsserver.Serve(ctx, xdsserver.Options{Impl: *impl, XDS: *xds, Control: *control, Holdoff: *holdoff, MaxHoldoff: *maxHoldoff,
		Streams: *streams, GRPCBuffers: *buffers, KeepaliveTimeout: *kaTimeout, Ready: os.Stdout, Logger: log.With("impl", *impl)})
}

// streamsUsage is the help of serve's and the benchmarks' --streams.
const streamsUsage = "the engine's limit of streams open at once (the bridge's xds.limits.streams), for a fleet larger than its default; 0 keeps the default"

// buffersUsage is the help of serve's and the benchmarks' --grpc-buffers.
const buffersUsage = "size in bytes of gRPC's read and write buffers of every server's connections (grpc.ReadBufferSize, grpc.WriteBufferSize); 0 keeps the bridge's transport"

// keepaliveUsage is the help of serve's and the benchmarks' --keepalive-timeout.
const keepaliveUsage = "every server's gRPC keepalive timeout (the bridge's xds.keepalive.timeout), which gRPC also sets as each connection's TCP_USER_TIMEOUT: " +
	"the kernel drops a connection whose client keeps its window closed that long, as a fleet sharing the server's CPUs may in a large cold start; 0 keeps gRPC's (20s)"

func benchmark(ctx context.Context, cmd string, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	out := fs.String("out", "out/bench", "output directory (report, CSV, chart, profiles)")
	impls := fs.String("impls", strings.Join(xdsserver.Impls, ","), "implementations to compare")
	timeout := fs.Duration("timeout", 60*time.Second, "bound of each wait (cold start, one change, reconnect)")
	preset := fs.String("preset", "quick", "bench: quick (reduced S1+S2, make bench) or full")
	scenarios := fs.String("scenarios", "", "bench: comma-separated scenarios (default: those of the preset)")
	var sz fanout.Sizes
	fs.IntVar(&sz.Clients, "c", 0, "clients (overrides the preset; run: default 200)")
	fs.IntVar(&sz.Services, "n", 0, "services (run: default 1000)")
	fs.IntVar(&sz.Endpoints, "e", 0, "endpoints per service (default 10)")
	fs.IntVar(&sz.Changes, "changes", 0, "sequential single-endpoint changes (run: default 20)")
	fs.Float64Var(&sz.Rate, "rate", 0, "changes per second (sustained churn instead of sequential changes)")
	fs.DurationVar(&sz.Duration, "duration", 0, "how long to apply changes at --rate")
	budget := fs.Duration("change-budget", -1, "stop sequential changes after this long (at least 5 changes); default: 30s for the quick preset, none otherwise")
	fs.DurationVar(&sz.Holdoff, "holdoff", 0, "server-side coalescing of changes, as the bridge's source manager (default: 100ms for S4, none otherwise; negative: none)")
	maxHoldoff := fs.Duration("max-holdoff", 0, "bound of a change's wait with --holdoff, so only a bound of holdoff (default 10× holdoff, as the bridge)")
	streams := fs.Int("streams", 0, streamsUsage)
	buffers := fs.Int("grpc-buffers", 0, buffersUsage)
	kaTimeout := fs.Duration("keepalive-timeout", 0, keepaliveUsage)
	reps := fs.Int("runs", 1, "run every configuration this many times (summarize the CSV for min/median/max)")
	warm := fs.Bool("warmup", true, "first run the largest configuration once, unrecorded (the first run of an invocation is slower for every server)")
	delta := fs.Bool("delta", false, "run: delta protocol instead of SotW")
	reconnect := fs.Bool("reconnect", false, "run: reconnect every client at the end")
	serverBins := fs.String("server-bin", "", "LABEL=PATH,...: an implementation named IMPL@LABEL in --impls is served by the xdsload binary at PATH (built from another commit), against this load generator")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	serverBin, err := parseServerBins(*serverBins)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own binary: %w", err)
	}
	var runs []fanout.Config
	if cmd == "bench" {
		var only []string
		if *scenarios != "" {
			only = strings.Split(*scenarios, ",")
		}
		if runs, err = fanout.Plan(*preset, only, strings.Split(*impls, ","), sz); err != nil {
			return err
		}
	} else {
		def := func(v, d int) int {
			if v == 0 {
				return d
			}
			return v
		}
		for im := range strings.SplitSeq(*impls, ",") {
			runs = append(runs, fanout.Config{Scenario: "run", Impl: im, Delta: *delta, Clients: def(sz.Clients, 200),
				Services: def(sz.Services, 1000), Endpoints: def(sz.Endpoints, 10), Changes: def(sz.Changes, 20),
				Rate: sz.Rate, Duration: sz.Duration, Reconnect: *reconnect, Holdoff: max(sz.Holdoff, 0)})
		}
	}
	runs = fanout.Repeat(runs, *reps)
	for i := range runs {
		if *budget >= 0 {
			runs[i].ChangeBudget = *budget
		}
		runs[i].MaxHoldoff = *maxHoldoff
		runs[i].Streams = *streams
		runs[i].GRPCBuffers = *buffers
		runs[i].KeepaliveTimeout = *kaTimeout
		if _, label, ok := strings.Cut(runs[i].Impl, "@"); ok {
			if runs[i].ServerBin = serverBin[label]; runs[i].ServerBin == "" {
				return fmt.Errorf("implementation %s: no --server-bin %s=PATH", runs[i].Impl, label)
			}
		}
	}
	abs, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	desc := machine() + "; the server and the load generator share every CPU (no split with 2 or fewer)"
	if srvCPUs, fleetCPUs, ok := fanout.SplitCPUs(); ok {
		if err := fanout.PinSelf(fleetCPUs); err != nil {
			return err
		}
		for i := range runs {
			runs[i].ServerCPUs = fanout.CPUList(srvCPUs)
		}
		desc = fmt.Sprintf("%s; the server runs on CPUs %s, the load generator on %s", machine(), fanout.CPUList(srvCPUs), fanout.CPUList(fleetCPUs))
	}
	suite := fanout.Suite{Runs: runs, Bin: bin, OutDir: abs, Timeout: *timeout, Logger: log, Machine: desc, Warmup: *warm}
	started := time.Now()
	results, err := suite.Run(ctx)
	fmt.Println(fanout.Markdown(results, suite.Machine))
	fmt.Printf("%d runs in %s; report, CSV, chart and profiles in %s\n", len(results), time.Since(started).Round(time.Second), abs)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.Failed {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs FAILED (see the report)", failed, len(results))
	}
	return nil
}

// machine describes the host for the report.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// runConsul runs the end-to-end scenario through a real Consul agent and the
// bridge binary.
func runConsul(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("consul", flag.ContinueOnError)
	out := fs.String("out", "out/bench/consul", "output directory")
	var cfg consul.Config
	binaryFlags(fs, &cfg.ConsulBin, &cfg.BridgeBin)
	fs.IntVar(&cfg.Clients, "c", 100, "clients")
	fs.IntVar(&cfg.Services, "n", 100, "services registered in Consul")
	fs.IntVar(&cfg.Instances, "instances", 5, "instances per service")
	fs.IntVar(&cfg.Changes, "changes", 20, "sequential changes (one instance re-registered on another port)")
	fs.BoolVar(&cfg.Delta, "delta", false, "delta protocol instead of SotW")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound of the wait for one change")
	abs, err := parseOut(fs, args, out)
	if err != nil {
		return err
	}
	cfg.OutDir, cfg.Logger = abs, log
	r, err := consul.Run(ctx, cfg)
	if err != nil {
		return err
	}
	md := fanout.Markdown([]fanout.Result{r}, machine())
	fmt.Println(md)
	var csv strings.Builder
	if err := fanout.CSV(&csv, []fanout.Result{r}); err != nil {
		return err
	}
	if err := errors.Join(os.WriteFile(filepath.Join(abs, "results.md"), []byte(md), 0o644),
		os.WriteFile(filepath.Join(abs, "results.csv"), []byte(csv.String()), 0o644)); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if r.Failed {
		return fmt.Errorf("consul scenario FAILED: %s", r.Problem)
	}
	return nil
}

// parseServerBins reads --server-bin: LABEL=PATH pairs, comma-separated.
func parseServerBins(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		label, path, ok := strings.Cut(kv, "=")
		if !ok || label == "" || path == "" {
			return nil, fmt.Errorf("--server-bin: %q is not LABEL=PATH", kv)
		}
		out[label] = path
	}
	return out, nil
}
