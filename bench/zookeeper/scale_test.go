// Package zookeeper_test is the ZooKeeper source's scale benchmark: 10,000
// Curator instances in 1,000 services on a real ZooKeeper. Each run
// measures, in two phases:
//
//   - the source alone (no bridge, no clients in the process): the time
//     and CPU of its first read, and the CPU of each change, from the
//     process's rusage;
//   - the whole bridge in-process with 100 ADS clients: the time from the
//     bridge's start to the source synced (its first update, read from the
//     bridge's log) and to every client holding every assignment, the time
//     from a change written to ZooKeeper to every client holding it (p50,
//     p99), the CPU of the process (bridge, clients and registrar
//     together), and what the bridge costs the registry (watches,
//     requests, bytes, from ZooKeeper's mntr).
//
// It runs only when asked; `make bench-zookeeper` runs it as:
//
//	XDSBRIDGE_BENCH=zookeeper go test -run TestScale -timeout 30m ./bench/zookeeper/ -args -runs 3 -out DIR
package zookeeper_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/zktest"
)

var (
	runs      = flag.Int("runs", 3, "runs; the summary takes the median of each figure")
	out       = flag.String("out", "", "directory for the raw results (none when empty)")
	services  = flag.Int("services", 1000, "services")
	instances = flag.Int("instances", 10, "instances per service")
	clients   = flag.Int("clients", 100, "ADS clients")
	changes   = flag.Int("changes", 50, "changes measured per run")
)

// result is one run's figures.
type result struct {
	Run         int     `json:"run"`
	Services    int     `json:"services"`
	Instances   int     `json:"instances"`
	Clients     int     `json:"clients"`
	SyncSeconds float64 `json:"first_sync_seconds"`
	// SourceSyncedSeconds is when the source's first update reached the
	// bridge: the part of the first sync that is the source's.
	SourceSyncedSeconds float64   `json:"source_synced_seconds"`
	P50Ms, P99Ms        float64   `json:"-"`
	LatenciesMs         []float64 `json:"change_to_all_clients_ms"`
	// The source alone.
	SourceReadSeconds float64            `json:"source_first_read_seconds"`
	SourceSyncCPUMs   float64            `json:"source_cpu_first_read_ms"`
	SourceChangeCPUMs float64            `json:"source_cpu_per_change_ms"`
	CPUSyncSec        float64            `json:"process_cpu_first_sync_seconds"`
	CPUPerChgMs       float64            `json:"process_cpu_per_change_ms"`
	Watches           int64              `json:"zk_watch_count"`
	SyncRegistry      map[string]float64 `json:"registry_first_sync"`
	ChgRegistry       map[string]float64 `json:"registry_per_change"`
	Connections       int64              `json:"zk_num_alive_connections_bridge"`
}

func mntr(t *testing.T, s *zktest.Server) map[string]float64 {
	t.Helper()
	txt, err := s.FourLetter("mntr")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(txt))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "\t"); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				m[k] = f
			}
		}
	}
	return m
}

// delta is what the counters the registry's cost is read from moved by.
func delta(a, b map[string]float64, per float64) map[string]float64 {
	d := map[string]float64{}
	for _, k := range []string{"zk_packets_received", "zk_packets_sent", "zk_bytes_received_count", "zk_watch_count"} {
		d[k] = (b[k] - a[k]) / per
	}
	return d
}

func TestScale(t *testing.T) {
	if os.Getenv("XDSBRIDGE_BENCH") != "zookeeper" {
		t.Skip("a benchmark: XDSBRIDGE_BENCH=zookeeper runs it")
	}
	var all []result
	for i := range *runs {
		all = append(all, run(t, i+1))
	}
	med := func(f func(r result) float64) float64 { return fleet.Median(all, f) }
	summary := fmt.Sprintf("%d instances in %d services, %d ADS clients, medians of %d runs:\n"+
		"first sync %.2f s (the source synced at %.2f s); change to every client p50 %.1f ms, p99 %.1f ms\n"+
		"the source alone: first read %.2f s, %.0f ms of CPU; %.2f ms of CPU per change\n"+
		"process CPU (bridge, clients, registrar): first sync %.2f s, per change %.2f ms\n"+
		"registry: %.0f watches, %.0f requests and %.0f bytes received at first sync; per change %.1f requests, %.0f bytes received\n",
		*instances**services, *services, *clients, len(all),
		med(func(r result) float64 { return r.SyncSeconds }), med(func(r result) float64 { return r.SourceSyncedSeconds }),
		med(func(r result) float64 { return r.P50Ms }), med(func(r result) float64 { return r.P99Ms }),
		med(func(r result) float64 { return r.SourceReadSeconds }), med(func(r result) float64 { return r.SourceSyncCPUMs }), med(func(r result) float64 { return r.SourceChangeCPUMs }),
		med(func(r result) float64 { return r.CPUSyncSec }), med(func(r result) float64 { return r.CPUPerChgMs }),
		med(func(r result) float64 { return float64(r.Watches) }),
		med(func(r result) float64 { return r.SyncRegistry["zk_packets_received"] }), med(func(r result) float64 { return r.SyncRegistry["zk_bytes_received_count"] }),
		med(func(r result) float64 { return r.ChgRegistry["zk_packets_received"] }), med(func(r result) float64 { return r.ChgRegistry["zk_bytes_received_count"] }))
	t.Log("\n" + summary)
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(all, "", "  ")
		_ = os.WriteFile(filepath.Join(*out, "runs.json"), b, 0o644)
		_ = os.WriteFile(filepath.Join(*out, "summary.txt"), []byte(summary), 0o644)
	}
}

func run(t *testing.T, n int) result {
	t.Helper()
	srv := zktest.Start(t)
	r := zktest.NewRegistrar(t, srv.Addr, 60*time.Second)
	res := result{Run: n, Services: *services, Instances: *instances, Clients: *clients}
	// Register concurrently: the registrar's session pipelines them.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for s := range *services {
		r.Curator("/services", fmt.Sprintf("svc-%04d", s), "id-0", "10.2.0.1", 8000)
		for i := 1; i < *instances; i++ {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				p := fmt.Sprintf("/services/svc-%04d/id-%d", s, i)
				if _, err := r.Conn.Create(p, zktest.CuratorInstance("x", "y", fmt.Sprintf("10.2.%d.%d", i, s%250+1), 8000), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	sourceAlone(t, srv, r, &res)
	before := mntr(t, srv)
	cpu0, start := fleet.CPU(), time.Now()
	synced := &logMark{mark: `msg="source synced"`}
	in := bridgetest.StartIn(t, t.TempDir(), fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - {name: zk, type: zookeeper, servers: [%q], services: [{path: /services, format: curator}]}
`, srv.Addr), synced)
	f := fleet.Start(t, in.XDSAddr().String(), *clients)
	f.WaitSynced(t, *services)
	res.SyncSeconds = time.Since(start).Seconds()
	res.CPUSyncSec = (fleet.CPU() - cpu0).Seconds()
	res.SourceSyncedSeconds = synced.at().Sub(start).Seconds()
	after := mntr(t, srv)
	res.SyncRegistry = delta(before, after, 1)
	res.Watches = int64(after["zk_watch_count"])
	res.Connections = int64(after["zk_num_alive_connections"]) - 2 // less the registrar's and mntr's own
	cpu1 := fleet.CPU()
	for k := range *changes {
		svc := fmt.Sprintf("svc-%04d", (k*37)%*services)
		d := f.Time(t, svc, func() { change(r, svc, 9000+k) })
		res.LatenciesMs = append(res.LatenciesMs, float64(d.Microseconds())/1000)
	}
	res.CPUPerChgMs = float64((fleet.CPU() - cpu1).Microseconds()) / 1000 / float64(*changes)
	res.ChgRegistry = delta(after, mntr(t, srv), float64(*changes))
	res.P50Ms, res.P99Ms = fleet.Pct(res.LatenciesMs, 0.5), fleet.Pct(res.LatenciesMs, 0.99)
	t.Logf("run %d: sync %.2fs (source %.2fs), p50 %.1fms p99 %.1fms, %d watches; source alone: first read %.0f ms CPU, %.2f ms CPU/change",
		n, res.SyncSeconds, res.SourceSyncedSeconds, res.P50Ms, res.P99Ms, res.Watches, res.SourceSyncCPUMs, res.SourceChangeCPUMs)
	return res
}

// change rewrites instance id-0 of svc with a new port, as Curator's
// updateService does.
func change(r *zktest.Registrar, svc string, port int) {
	r.Set("/services/"+svc+"/id-0", zktest.CuratorInstance(svc, "id-0", "10.2.0.1", port))
}

// logMark is the bridge's log, discarded but for the time of the first
// line that holds mark.
type logMark struct {
	mark string
	mu   sync.Mutex
	seen time.Time
}

func (w *logMark) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.seen.IsZero() && strings.Contains(string(p), w.mark) {
		w.seen = time.Now()
	}
	w.mu.Unlock()
	return len(p), nil
}

func (w *logMark) at() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// sourceAlone runs the ZooKeeper source with nothing else in the process
// and measures the time and CPU of its first read (from Run, the session's
// establishment included) and the CPU of each change (the registrar's
// write of the change, a ZooKeeper client call, included). Its changes use
// ports the bridge phase does not, so that each is a change.
func sourceAlone(t *testing.T, srv *zktest.Server, r *zktest.Registrar, res *result) {
	t.Helper()
	typ, _ := sources.Lookup("zookeeper")
	src, err := typ.New(map[string]any{
		"servers":  []any{srv.Addr},
		"services": []any{map[string]any{"path": "/services", "format": "curator"}},
	}, sources.Options{Name: "zk"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := make(chan sources.Update)
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx, up) }()
	defer func() { cancel(); <-done }()
	cpu0, start := fleet.CPU(), time.Now()
	if u := <-up; !u.Full || len(u.Services) != *services {
		t.Fatalf("first update: full %v, %d services", u.Full, len(u.Services))
	}
	res.SourceReadSeconds = time.Since(start).Seconds()
	res.SourceSyncCPUMs = float64((fleet.CPU() - cpu0).Microseconds()) / 1000
	cpu1 := fleet.CPU()
	for k := range *changes {
		change(r, fmt.Sprintf("svc-%04d", (k*37+11)%*services), 20000+k)
		<-up
	}
	res.SourceChangeCPUMs = float64((fleet.CPU() - cpu1).Microseconds()) / 1000 / float64(*changes)
}
