// Command memory measures what a bridge keeps after names come and go: the
// bridge binary on a services file, one delta ADS client (wildcard CDS,
// EDS for every cluster) holding what it serves.
//
// Churn: rounds of new service names (by default 10 rounds of 20,000
// never seen before), each round back to the 6 base services; after each
// round, the bridge's live heap after a forced collection. The heap must
// not grow with the names ever served.
//
// Shrink: a bridge started with 100,000 services shrunk to 6, against a
// bridge started with 6: the resident set once memory.return_after_quiet
// has returned the shrink's garbage (the default, 1 s), and how long that
// took. No collection is forced in this scenario before the figure is
// read: the return is the bridge's own.
//
// Each scenario runs --runs times (3); the report gives medians.
// Usage:
//
//	go build -o /tmp/bridge ./cmd/bridge
//	go run ./bench/memory --bridge /tmp/bridge --out docs/bench-results/memory
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	bridge    string
	out       string
	runs      int
	rounds    int
	names     int
	large     int
	quietWait time.Duration // the longest wait for the bridge's own return after the shrink
	settle    time.Duration // how long the small bridge runs before its resident set is read
	patience  time.Duration // bound of each wait for the client to hold a state
}

func main() {
	var cfg config
	flag.StringVar(&cfg.bridge, "bridge", "", "the bridge binary (required)")
	flag.StringVar(&cfg.out, "out", "out/bench/memory", "directory for results.md, results.csv and the bridges' logs")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each scenario")
	flag.IntVar(&cfg.rounds, "rounds", 10, "churn rounds")
	flag.IntVar(&cfg.names, "names", 20000, "new service names per churn round")
	flag.IntVar(&cfg.large, "large", 100000, "services before the shrink")
	flag.DurationVar(&cfg.quietWait, "quiet-wait", 90*time.Second, "the longest wait for memory to be returned after the shrink")
	flag.DurationVar(&cfg.settle, "settle", 10*time.Second, "how long the bridge started small runs before its resident set is read")
	flag.DurationVar(&cfg.patience, "patience", 5*time.Minute, "bound of each wait for the client to hold a state")
	flag.Parse()
	if cfg.bridge == "" {
		fmt.Fprintln(os.Stderr, "memory: --bridge is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

// sample is one figure of one run: a row of results.csv.
type sample struct {
	scenario string
	run      int
	figure   string
	value    float64
	unit     string
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var all []sample
	for r := 1; r <= cfg.runs; r++ {
		s, err := churn(ctx, cfg, r, log)
		all = append(all, s...)
		if err != nil {
			return fmt.Errorf("churn, run %d: %w", r, err)
		}
		s, err = shrink(ctx, cfg, r, log)
		all = append(all, s...)
		if err != nil {
			return fmt.Errorf("shrink, run %d: %w", r, err)
		}
	}
	if err := writeCSV(filepath.Join(cfg.out, "results.csv"), all); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.out, "results.md"), []byte(report(cfg, all)), 0o644)
}

// churn runs the rounds on one bridge and samples its live heap after each.
func churn(ctx context.Context, cfg config, run int, log *slog.Logger) ([]sample, error) {
	dir, err := os.MkdirTemp("", "memory-churn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := startBridge(ctx, cfg.bridge, dir, filepath.Join(cfg.out, fmt.Sprintf("churn.%d.bridge.log", run)), base, cfg.patience)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	var out []sample
	heap, err := b.liveHeap()
	if err != nil {
		return nil, err
	}
	out = append(out, sample{"churn", run, "live heap before", float64(heap), "B"})
	for r := 1; r <= cfg.rounds; r++ {
		if err := b.serve(ctx, r*cfg.names, cfg.names, cfg.patience); err != nil {
			return out, fmt.Errorf("round %d, %d new names: %w", r, cfg.names, err)
		}
		if err := b.serve(ctx, 0, 0, cfg.patience); err != nil {
			return out, fmt.Errorf("round %d, back to %d: %w", r, base, err)
		}
		heap, err := b.liveHeap()
		if err != nil {
			return out, err
		}
		out = append(out, sample{"churn", run, fmt.Sprintf("live heap after round %d", r), float64(heap), "B"})
		log.Info("churn round", "run", run, "round", r, "live_heap_mb", mb(heap))
		if r == 1 {
			if err := b.saveHeap(filepath.Join(cfg.out, fmt.Sprintf("churn.%d.round1.heap.pprof", run))); err != nil {
				return out, err
			}
		}
	}
	return out, b.saveHeap(filepath.Join(cfg.out, fmt.Sprintf("churn.%d.heap.pprof", run)))
}

// shrink runs a bridge from cfg.large services to base, and one started
// with base, and compares their resident sets.
func shrink(ctx context.Context, cfg config, run int, log *slog.Logger) ([]sample, error) {
	dir, err := os.MkdirTemp("", "memory-shrink-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []sample
	small, err := startBridge(ctx, cfg.bridge, dir, filepath.Join(cfg.out, fmt.Sprintf("small.%d.bridge.log", run)), base, cfg.patience)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(cfg.settle):
	case <-ctx.Done():
	}
	out = append(out, sample{"shrink", run, "RSS, started with 6", float64(small.rss()), "B"})
	err = small.saveMetrics(filepath.Join(cfg.out, fmt.Sprintf("small.%d.metrics.txt", run)))
	small.stop()
	if err != nil {
		return out, err
	}

	dir2, err := os.MkdirTemp("", "memory-shrink-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir2)
	start := time.Now()
	b, err := startBridge(ctx, cfg.bridge, dir2, filepath.Join(cfg.out, fmt.Sprintf("shrink.%d.bridge.log", run)), cfg.large, cfg.patience)
	if err != nil {
		return out, err
	}
	defer b.stop()
	out = append(out,
		sample{"shrink", run, fmt.Sprintf("first state of %d, process start until the client holds it", cfg.large), time.Since(start).Seconds(), "s"},
		sample{"shrink", run, fmt.Sprintf("RSS, %d served", cfg.large), float64(b.rss()), "B"})
	// The first state's own burst is returned first (or not at all): a
	// return the shrink's must not be mistaken for.
	before, err := settled(ctx, b, 3*time.Second, cfg.quietWait)
	if err != nil {
		return out, err
	}
	out = append(out, sample{"shrink", run, fmt.Sprintf("RSS, %d served, settled", cfg.large), float64(b.rss()), "B"})
	if err := b.serve(ctx, 0, 0, cfg.patience); err != nil {
		return out, fmt.Errorf("shrinking to %d: %w", base, err)
	}
	// The removal takes a burst of its own, which is quiet no sooner than
	// memory.return_after_quiet after it: a return before the client holds
	// the removal is not the shrink's.
	shrunk := time.Now()
	out = append(out, sample{"shrink", run, "RSS, once the client holds 6", float64(b.rss()), "B"})
	if before, err = b.metric("xdsbridge_memory_returns_total"); err != nil {
		return out, err
	}
	err = pollEvery(ctx, time.Second, cfg.quietWait, func() bool {
		n, err := b.metric("xdsbridge_memory_returns_total")
		return err == nil && n > before
	})
	returned := err == nil
	out = append(out, sample{"shrink", run, "memory returned after the shrink (1 yes, 0 no)", map[bool]float64{true: 1}[returned], ""})
	if returned {
		out = append(out, sample{"shrink", run, "time until memory returned", time.Since(shrunk).Seconds(), "s"})
	} else {
		log.Warn("memory was not returned after the shrink", "run", run, "within", cfg.quietWait)
	}
	rss := b.rss()
	out = append(out, sample{"shrink", run, "RSS, shrunk to 6, after the return", float64(rss), "B"})
	if err := b.saveMetrics(filepath.Join(cfg.out, fmt.Sprintf("shrink.%d.metrics.txt", run))); err != nil {
		return out, err
	}
	heap, err := b.liveHeap()
	if err != nil {
		return out, err
	}
	out = append(out, sample{"shrink", run, "live heap, shrunk to 6 (forced collection, after the RSS)", float64(heap), "B"})
	log.Info("shrink", "run", run, "returned", returned, "rss_mb", mb(rss), "live_heap_mb", mb(heap))
	return out, b.saveHeap(filepath.Join(cfg.out, fmt.Sprintf("shrink.%d.heap.pprof", run)))
}

// settled waits until the bridge's count of memory returns has not moved
// for quiet (at most limit) and returns it.
func settled(ctx context.Context, b *bridge, quiet, limit time.Duration) (float64, error) {
	last, err := b.metric("xdsbridge_memory_returns_total")
	if err != nil {
		return 0, err
	}
	since := time.Now()
	err = pollEvery(ctx, time.Second, limit, func() bool {
		n, err := b.metric("xdsbridge_memory_returns_total")
		if err != nil || n != last {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	})
	return last, err
}

func writeCSV(path string, all []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scenario", "run", "figure", "value", "unit"})
	for _, s := range all {
		_ = w.Write([]string{s.scenario, strconv.Itoa(s.run), s.figure, strconv.FormatFloat(s.value, 'f', -1, 64), s.unit})
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

// report is results.md: each figure's median over the runs, with its range.
func report(cfg config, all []sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory after name churn and after a shrink\n\n")
	fmt.Fprintf(&b, "`go run ./bench/memory` (bridge %s), %d runs, medians with (min–max). Churn: %d rounds of %d new names, each back to %d services. Shrink: %d services to %d, against a bridge started with %d.\n\n",
		filepath.Base(cfg.bridge), cfg.runs, cfg.rounds, cfg.names, base, cfg.large, base, base)
	fmt.Fprintf(&b, "| scenario | figure | median | range |\n|---|---|---:|---|\n")
	var order []string
	by := map[string][]sample{}
	for _, s := range all {
		k := s.scenario + "\x00" + s.figure
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], s)
	}
	med := map[string]float64{}
	for _, k := range order {
		ss := by[k]
		vs := make([]float64, len(ss))
		for i, s := range ss {
			vs[i] = s.value
		}
		slices.Sort(vs)
		m := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		med[ss[0].figure] = m
		fmt.Fprintf(&b, "| %s | %s | %s | %s–%s |\n", ss[0].scenario, ss[0].figure, show(m, ss[0].unit), show(vs[0], ss[0].unit), show(vs[len(vs)-1], ss[0].unit))
	}
	first, last := med["live heap after round 1"], med[fmt.Sprintf("live heap after round %d", cfg.rounds)]
	small, shrunk := med["RSS, started with 6"], med["RSS, shrunk to 6, after the return"]
	fmt.Fprintf(&b, "\nLive heap after the last round over after the first: %.2f× (target ≤ 1.10×).\n", last/first)
	fmt.Fprintf(&b, "RSS shrunk to %d over started with %d: %.2f× (target ≤ 2×).\n", base, base, shrunk/small)
	return b.String()
}

func show(v float64, unit string) string {
	switch unit {
	case "B":
		return fmt.Sprintf("%.1f MB", v/1e6)
	case "s":
		return fmt.Sprintf("%.1f s", v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func mb(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) }
