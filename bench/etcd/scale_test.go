// Package etcd_test is the etcd source's scale benchmark: 10,000 gRPC
// naming instances in 1,000 services on a real etcd, written by gRPC-Go's
// endpoints manager. Each run measures, in two phases:
//
//   - the source alone (no bridge, no clients in the process): the CPU of
//     its first read and of each change, from the process's rusage;
//   - the whole bridge in-process with 100 ADS clients: the time from a
//     change written to etcd to every client holding it (p50, p99), and
//     what the bridge costs etcd, from etcd's own /metrics: watches held,
//     watch streams, read requests and bytes sent, at the first sync and
//     per change.
//
// It runs only when asked; `make bench-etcd` runs it as:
//
//	XDSBRIDGE_BENCH=etcd go test -run TestScale -timeout 30m ./bench/etcd/ -args -runs 3 -out DIR
package etcd_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/naming/endpoints"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/etcdtest"
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
	Run         int       `json:"run"`
	Services    int       `json:"services"`
	Instances   int       `json:"instances"`
	Clients     int       `json:"clients"`
	SyncSeconds float64   `json:"first_sync_to_all_clients_seconds"`
	LatenciesMs []float64 `json:"change_to_all_clients_ms"`
	P50Ms       float64   `json:"change_to_all_clients_p50_ms"`
	P99Ms       float64   `json:"change_to_all_clients_p99_ms"`
	// The source alone.
	SourceSyncCPUMs   float64 `json:"source_cpu_first_read_ms"`
	SourceChangeCPUMs float64 `json:"source_cpu_per_change_ms"`
	// What the bridge cost etcd (from etcd's /metrics).
	Watchers       float64            `json:"etcd_watchers"`
	WatchStreams   float64            `json:"etcd_watch_streams"`
	SyncCost       map[string]float64 `json:"etcd_first_sync"`
	PerChangeCost  map[string]float64 `json:"etcd_per_change"`
	ProcessCPUSync float64            `json:"process_cpu_first_sync_seconds"`
}

// etcdCost reads the counters of etcd's work for clients: read requests,
// watch streams opened, bytes sent and received on client connections.
func etcdCost(t *testing.T, srv *etcdtest.Server) map[string]float64 {
	t.Helper()
	m, err := srv.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]float64{}
	for k, q := range map[string][]string{
		"range_requests": {"grpc_server_handled_total", `grpc_method="Range"`},
		"watch_streams":  {"grpc_server_started_total", `grpc_method="Watch"`},
		"watch_messages": {"grpc_server_msg_sent_total", `grpc_method="Watch"`},
		"bytes_sent":     {"etcd_network_client_grpc_sent_bytes_total"},
		"bytes_received": {"etcd_network_client_grpc_received_bytes_total"},
		"watchers":       {"etcd_debugging_mvcc_watcher_total"},
	} {
		v, err := etcdtest.Count(m, q[0], q[1:]...)
		if err == nil {
			c[k] = v
		}
	}
	return c
}

func delta(a, b map[string]float64, per float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range b {
		if k != "watchers" {
			d[k] = (v - a[k]) / per
		}
	}
	return d
}

func TestScale(t *testing.T) {
	if os.Getenv("XDSBRIDGE_BENCH") != "etcd" {
		t.Skip("a benchmark: XDSBRIDGE_BENCH=etcd runs it")
	}
	var all []result
	for i := range *runs {
		all = append(all, run(t, i+1))
	}
	med := func(f func(r result) float64) float64 { return fleet.Median(all, f) }
	summary := fmt.Sprintf("%d instances in %d services (grpc-naming), %d ADS clients, medians of %d runs:\n"+
		"first sync to every client %.2f s; change to every client p50 %.1f ms, p99 %.1f ms\n"+
		"the source alone: first read %.0f ms of CPU, %.2f ms of CPU per change\n"+
		"etcd: %.0f watches on %.0f watch stream(s); first sync %.0f read requests, %.0f bytes sent; per change %.1f watch messages, %.0f bytes sent, %.1f read requests\n",
		*instances**services, *services, *clients, len(all),
		med(func(r result) float64 { return r.SyncSeconds }), med(func(r result) float64 { return r.P50Ms }), med(func(r result) float64 { return r.P99Ms }),
		med(func(r result) float64 { return r.SourceSyncCPUMs }), med(func(r result) float64 { return r.SourceChangeCPUMs }),
		med(func(r result) float64 { return r.Watchers }), med(func(r result) float64 { return r.WatchStreams }),
		med(func(r result) float64 { return r.SyncCost["range_requests"] }), med(func(r result) float64 { return r.SyncCost["bytes_sent"] }),
		med(func(r result) float64 { return r.PerChangeCost["watch_messages"] }), med(func(r result) float64 { return r.PerChangeCost["bytes_sent"] }),
		med(func(r result) float64 { return r.PerChangeCost["range_requests"] }))
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

// register writes every instance through gRPC-Go's endpoints manager, a
// service's instances in one transaction.
func register(t *testing.T, srv *etcdtest.Server) {
	t.Helper()
	c := srv.Client(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for s := range *services {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			target := fmt.Sprintf("services/svc-%04d", s)
			m, err := endpoints.NewManager(c, target)
			if err != nil {
				t.Error(err)
				return
			}
			var ups []*endpoints.UpdateWithOpts
			for i := range *instances {
				addr := fmt.Sprintf("10.%d.%d.%d:8080", 1+s/250, s%250, i+1)
				ups = append(ups, endpoints.NewAddUpdateOpts(target+"/"+addr, endpoints.Endpoint{Addr: addr, Metadata: map[string]string{"version": "v1"}}))
			}
			if err := m.Update(t.Context(), ups); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// change rewrites instance 0 of service s with a new port, as a
// re-registration on another port would.
func change(t *testing.T, m endpoints.Manager, s, k int) {
	t.Helper()
	target := fmt.Sprintf("services/svc-%04d", s)
	key := fmt.Sprintf("%s/10.%d.%d.1:8080", target, 1+s/250, s%250)
	addr := fmt.Sprintf("10.%d.%d.1:%d", 1+s/250, s%250, 9000+k)
	if err := m.AddEndpoint(t.Context(), key, endpoints.Endpoint{Addr: addr}); err != nil {
		t.Fatal(err)
	}
}

const sourceConfig = `{"endpoints": [%q], "services": [{"prefix": "services/", "format": "grpc-naming"}]}`

// sourceAlone runs the etcd source with nothing else in the process and
// measures the CPU of its first read and of each change (the write of the
// change, an etcd client call, included).
func sourceAlone(t *testing.T, srv *etcdtest.Server, res *result) {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(fmt.Appendf(nil, sourceConfig, srv.ClientURL), &raw); err != nil {
		t.Fatal(err)
	}
	typ, _ := sources.Lookup("etcd")
	src, err := typ.New(raw, sources.Options{Name: "etcd"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := make(chan sources.Update)
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx, up) }()
	defer func() { cancel(); <-done }()
	cpu0 := fleet.CPU()
	if u := <-up; !u.Full || len(u.Services) != *services {
		t.Fatalf("first update: full %v, %d services", u.Full, len(u.Services))
	}
	res.SourceSyncCPUMs = float64((fleet.CPU() - cpu0).Microseconds()) / 1000
	m, _ := endpoints.NewManager(srv.Client(t), "services")
	cpu1 := fleet.CPU()
	for k := range *changes {
		change(t, m, (k*37)%*services, k)
		<-up
	}
	res.SourceChangeCPUMs = float64((fleet.CPU() - cpu1).Microseconds()) / 1000 / float64(*changes)
}

func run(t *testing.T, n int) result {
	t.Helper()
	srv := etcdtest.Start(t)
	res := result{Run: n, Services: *services, Instances: *instances, Clients: *clients}
	register(t, srv)
	sourceAlone(t, srv, &res)

	before := etcdCost(t, srv)
	cpu0, start := fleet.CPU(), time.Now()
	in := bridgetest.StartIn(t, t.TempDir(), fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - {name: etcd, type: etcd, endpoints: [%q], services: [{prefix: services/, format: grpc-naming}]}
`, srv.ClientURL), fleet.Discard{})
	f := fleet.Start(t, in.XDSAddr().String(), *clients)
	f.WaitSynced(t, *services)
	res.SyncSeconds = time.Since(start).Seconds()
	res.ProcessCPUSync = (fleet.CPU() - cpu0).Seconds()
	synced := etcdCost(t, srv)
	res.SyncCost = delta(before, synced, 1)
	res.Watchers = synced["watchers"]
	res.WatchStreams = res.SyncCost["watch_streams"]
	m, _ := endpoints.NewManager(srv.Client(t), "services")
	for k := range *changes {
		s := (k*37 + 11) % *services
		d := f.Time(t, fmt.Sprintf("svc-%04d", s), func() { change(t, m, s, 1000+k) })
		res.LatenciesMs = append(res.LatenciesMs, float64(d.Microseconds())/1000)
	}
	res.PerChangeCost = delta(synced, etcdCost(t, srv), float64(*changes))
	res.P50Ms, res.P99Ms = fleet.Pct(res.LatenciesMs, 0.5), fleet.Pct(res.LatenciesMs, 0.99)
	t.Logf("run %d: sync %.2fs, p50 %.1fms p99 %.1fms; source alone: first read %.0f ms CPU, %.2f ms CPU/change; etcd: %v watchers, sync %v, per change %v",
		n, res.SyncSeconds, res.P50Ms, res.P99Ms, res.SourceSyncCPUMs, res.SourceChangeCPUMs, res.Watchers, res.SyncCost, res.PerChangeCost)
	return res
}
