// Command faults is the fault benchmark: what the bridge costs, and what
// it costs its Consul agent, while the agent fails, and how soon clients
// hold the agent's new state once it is back.
//
// A -dev Consul agent serves 20 services of 2 instances; the bridge
// binary (default settings) reads it through a counting proxy
// (test/countproxy), and a delta-ADS client watches the bridge. Each
// run measures, over a window each: the bridge at rest; the agent killed
// (SIGKILL); the agent stopped (SIGINT); the agent's HTTPS listener
// presenting a certificate of an untrusted CA (a second bridge, reading
// the agent over HTTPS). For each, the bridge's CPU (from /proc/PID/stat,
// in percent of one core) and the attempts the proxy counted per second
// (requests and refused connections over HTTP, handshakes over HTTPS),
// over the whole window and over its second half (once the backoff has
// reached its pace). After the killed and stopped agent comes back empty
// and the bridge reads it again, the services are registered again with
// one new instance, and the time from that registration to the client
// holding it is taken; after the certificate is trusted again, the same
// for one new instance. Each figure's median over the runs is reported.
//
//	go run ./bench/faults --bridge out/bench/bridge --consul "$XDSBRIDGE_CONSUL" --out docs/bench-results/faults
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config is the benchmark's flags.
type config struct {
	bridge, consul, out string
	runs, services      int
	window              time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.bridge, "bridge", "out/bench/bridge", "the bridge binary")
	flag.StringVar(&cfg.consul, "consul", os.Getenv("XDSBRIDGE_CONSUL"), "the consul binary (env XDSBRIDGE_CONSUL)")
	flag.StringVar(&cfg.out, "out", "out/bench/faults", "directory of the raw results and the summary")
	flag.IntVar(&cfg.runs, "runs", 3, "runs; the summary takes the median of each figure")
	flag.IntVar(&cfg.services, "services", 20, "services registered, 2 instances each")
	flag.DurationVar(&cfg.window, "window", 20*time.Second, "how long each fault is measured")
	flag.Parse()
	if cfg.consul == "" {
		fmt.Fprintln(os.Stderr, "faults: --consul (or XDSBRIDGE_CONSUL) is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var all [][]result
	for i := 1; i <= cfg.runs; i++ {
		fmt.Fprintf(os.Stderr, "run %d of %d\n", i, cfg.runs)
		rs, err := runOnce(ctx, cfg)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		b, _ := json.MarshalIndent(rs, "", "  ")
		if err := os.WriteFile(filepath.Join(cfg.out, fmt.Sprintf("run-%d.json", i)), append(b, '\n'), 0o644); err != nil {
			return err
		}
		all = append(all, rs)
	}
	table := summarize(all, cfg)
	fmt.Print(table)
	return os.WriteFile(filepath.Join(cfg.out, "summary.md"), []byte(table), 0o644)
}

// result is one fault's figures in one run.
type result struct {
	Fault   string  `json:"fault"`
	Seconds float64 `json:"window_seconds"`
	// CPU is the bridge's CPU in percent of one core over the window;
	// SteadyCPU over its second half.
	CPU       float64 `json:"bridge_cpu_percent"`
	SteadyCPU float64 `json:"bridge_cpu_percent_second_half"`
	// Rate is the attempts at the agent per second over the window;
	// SteadyRate over its second half; Attempts their count.
	Rate       float64 `json:"agent_attempts_per_second"`
	SteadyRate float64 `json:"agent_attempts_per_second_second_half"`
	Attempts   int64   `json:"agent_attempts"`
	// BackMs is the time from the registration that completes the
	// agent's new state to the client holding it, after the fault; -1
	// when the client did not hold it within a minute.
	BackMs *float64 `json:"registration_to_client_ms,omitempty"`
}

// summarize returns the Markdown table of the medians.
func summarize(all [][]result, cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Medians of %d runs; each fault measured for %s (second half: once the backoff has reached its pace).\n\n", len(all), cfg.window)
	b.WriteString("| fault | bridge CPU, % of a core (second half) | attempts at the agent /s (second half) | registration → client holds it |\n")
	b.WriteString("|---|---|---|---|\n")
	for i, r := range all[0] {
		pick := func(f func(result) float64) float64 {
			var v []float64
			for _, rs := range all {
				v = append(v, f(rs[i]))
			}
			return median(v)
		}
		back := "–"
		if r.BackMs != nil {
			ms := pick(func(r result) float64 { return *r.BackMs })
			back = fmt.Sprintf("%.0f ms", ms)
			if ms < 0 {
				back = "not within a minute"
			}
		}
		fmt.Fprintf(&b, "| %s | %.2f (%.2f) | %.2f (%.2f) | %s |\n", r.Fault,
			pick(func(r result) float64 { return r.CPU }), pick(func(r result) float64 { return r.SteadyCPU }),
			pick(func(r result) float64 { return r.Rate }), pick(func(r result) float64 { return r.SteadyRate }), back)
	}
	return b.String()
}

func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
