package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/procstat"
)

// result is one run of one variant.
type result struct {
	Run       int    `json:"run"`
	Variant   string `json:"variant"`
	Delta     bool   `json:"delta"`
	Clients   int    `json:"clients"`
	Services  int    `json:"services"`
	Endpoints int    `json:"endpoints_per_service"`
	// ColdStartMs is from the clients' first connection to every client
	// holding everything; ColdCPUMs the bridge's CPU until then (its
	// start, the file's first read and the cold start).
	ColdStartMs float64  `json:"cold_start_ms"`
	ColdCPUMs   float64  `json:"cold_start_bridge_cpu_ms"`
	Series      []series `json:"series"`
	// ColdRSS and BridgeRSS are the bridge's resident memory once every
	// client holds everything, and at the end, in bytes.
	ColdRSS   int64 `json:"cold_start_bridge_rss_bytes"`
	BridgeRSS int64 `json:"bridge_rss_bytes"`
	// ColdLive and Live are the bridge's live heap at the same moments
	// (go_gc_heap_live_bytes: what the last collection kept), which tells
	// what it holds from the garbage RSS also counts.
	ColdLive int64 `json:"cold_start_bridge_live_heap_bytes"`
	Live     int64 `json:"bridge_live_heap_bytes"`
	// Load1 is the 1-minute load average at the start and at the end.
	Load1   [2]float64 `json:"load1"`
	Problem string     `json:"problem,omitempty"`
}

// series is the figures of one kind of change over a run.
type series struct {
	Kind    string `json:"kind"` // endpoint, route or certificate
	Changes int    `json:"changes"`
	// The CPU of the bridge and of this process (the clients) over the
	// whole series, per client and change.
	BridgeCPUPerClientChangeUs  float64 `json:"bridge_cpu_per_client_change_us"`
	LoadgenCPUPerClientChangeUs float64 `json:"loadgen_cpu_per_client_change_us"`
	// Latencies from the write to a client holding the change, over every
	// client of every change; PerChangeP99Ms each change's p99.
	P50Ms          float64   `json:"latency_p50_ms"`
	P99Ms          float64   `json:"latency_p99_ms"`
	MaxMs          float64   `json:"latency_max_ms"`
	PerChangeP99Ms []float64 `json:"per_change_p99_ms"`
	// BytesPerClientChange are the bytes of the responses the clients
	// received during the series, per client and change, by type.
	BytesPerClientChange map[string]float64 `json:"bytes_per_client_change"`
}

// typeNames are the short names of the type URLs.
var typeNames = map[string]string{envoysim.ClusterType: "cds", envoysim.EndpointType: "eds", envoysim.ListenerType: "lds",
	envoysim.RouteType: "rds", envoysim.SecretType: "sds"}

// runOnce starts a bridge of variant and its fleet, and measures each kind
// of change. A change that does not reach every client within the timeout
// is the result's Problem.
func runOnce(ctx context.Context, cfg config, variant string, run int, log *slog.Logger) (result, error) {
	res := result{Run: run, Variant: variant, Delta: cfg.delta, Clients: cfg.clients, Services: cfg.services, Endpoints: cfg.eps}
	res.Load1[0] = loadAvg()
	spec := workload.Spec{Services: cfg.services, Endpoints: cfg.eps}
	if err := spec.Validate(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "xdsload-edge-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	edge := variant == variantEdge
	b, err := startBridge(ctx, cfg.bridge, dir, variant, filepath.Join(cfg.out, fmt.Sprintf("run-%d-%s.bridge.log", run, variant)), spec, cfg.heapProfile)
	if err != nil {
		return res, err
	}
	defer b.stop()
	start := time.Now()
	f, err := startFleet(ctx, b.xds, cfg.clients, cfg.delta, edge)
	if err != nil {
		return res, err
	}
	defer f.close()
	var streamErr error
	err = poll(ctx, cfg.timeout, 100*time.Millisecond, func() bool {
		ok, err := f.holds(cfg.services, edge)
		streamErr = err
		return ok || err != nil
	})
	if err == nil {
		err = streamErr
	}
	if err != nil {
		res.Problem = fmt.Sprintf("cold start: %v", err)
		return res, nil
	}
	res.ColdStartMs = ms(time.Since(start))
	cold, err := procstat.Read(b.pid())
	if err != nil {
		return res, err
	}
	res.ColdCPUMs, res.ColdRSS, res.ColdLive = ms(cold.CPU), cold.RSS, b.liveHeap()
	if cfg.heapProfile {
		if err := b.saveHeap(filepath.Join(cfg.out, fmt.Sprintf("run-%d-%s.heap.pprof", run, variant))); err != nil {
			return res, err
		}
	}
	log.Info("cold start", "variant", variant, "ms", res.ColdStartMs, "bridge_cpu_ms", res.ColdCPUMs)

	kinds := []kind{{"endpoint", envoysim.EndpointType, cfg.endpointChanges, func(k int) (string, func() error) {
		return workload.Name(spec.Target(k)), func() error { return b.editEndpoint(k) }
	}}}
	if edge {
		kinds = append(kinds,
			kind{"route", envoysim.RouteType, cfg.routeChanges, func(k int) (string, func() error) {
				return routeConfig, func() error { return b.editRoute(k) }
			}},
			kind{"certificate", envoysim.SecretType, cfg.rotations, func(int) (string, func() error) {
				return secretName, b.rotate
			}})
	}
	for _, kd := range kinds {
		// The last change's acknowledgements are the previous series'
		// work: they are let in before this one's counters are read.
		time.Sleep(2 * time.Second)
		s, err := measure(ctx, f, b.pid(), kd, cfg.timeout)
		if err != nil {
			res.Problem = fmt.Sprintf("%s changes: %v", kd.kind, err)
			return res, nil
		}
		log.Info("series", "variant", variant, "kind", kd.kind, "bridge_us_per_client_change", s.BridgeCPUPerClientChangeUs,
			"p99_ms", s.P99Ms, "bytes_per_client_change", s.BytesPerClientChange)
		res.Series = append(res.Series, s)
	}
	end, err := procstat.Read(b.pid())
	if err != nil {
		return res, err
	}
	res.BridgeRSS, res.Live = end.RSS, b.liveHeap()
	res.Load1[1] = loadAvg()
	return res, nil
}

// kind is one kind of change: n of them, change(k) returning the
// resource of typeURL the k-th changes and how to make it.
type kind struct {
	kind, typeURL string
	n             int
	change        func(k int) (name string, write func() error)
}

// measure makes n changes of one kind one after the other, each once
// every client holds the last, and returns the series' figures.
func measure(ctx context.Context, f *fleet, pid int, kd kind, timeout time.Duration) (series, error) {
	n := kd.n
	s := series{Kind: kd.kind, Changes: n, BytesPerClientChange: map[string]float64{}}
	self := os.Getpid()
	b0, err := procstat.Read(pid)
	if err != nil {
		return s, err
	}
	l0, err := procstat.Read(self)
	if err != nil {
		return s, err
	}
	bytes0 := f.byteCounts()
	var all []time.Duration
	for k := 1; k <= n; k++ {
		name, write := kd.change(k)
		lats, err := f.timed(ctx, kd.typeURL, name, timeout, write)
		if err != nil {
			return s, fmt.Errorf("change %d: %w", k, err)
		}
		all = append(all, lats...)
		slices.Sort(lats)
		s.PerChangeP99Ms = append(s.PerChangeP99Ms, ms(pct(lats, 99)))
	}
	b1, err := procstat.Read(pid)
	if err != nil {
		return s, err
	}
	l1, err := procstat.Read(self)
	if err != nil {
		return s, err
	}
	per := float64(n * len(f.clients))
	s.BridgeCPUPerClientChangeUs = float64(b1.CPU-b0.CPU) / float64(time.Microsecond) / per
	s.LoadgenCPUPerClientChangeUs = float64(l1.CPU-l0.CPU) / float64(time.Microsecond) / per
	for t, v := range f.byteCounts() {
		if d := v - bytes0[t]; d > 0 {
			s.BytesPerClientChange[typeNames[t]] = float64(d) / per
		}
	}
	slices.Sort(all)
	s.P50Ms, s.P99Ms, s.MaxMs = ms(pct(all, 50)), ms(pct(all, 99)), ms(all[len(all)-1])
	return s, nil
}

// pct is the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
