// Package fanout drives the project's xDS benchmark: it starts a server
// implementation as its own process (see package target), connects a fleet
// of Envoy-like clients (envoysim, Light mode), applies numbered changes and
// measures how fast and at what cost every client converges, and validates
// that every client ends up holding exactly the source's state. The
// scenarios S1..S7 compare the engine with go-control-plane's caches and
// the floor (Plan, Suite); their results are written as Markdown, CSV and
// a chart, checked against the targets of docs/benchmarks.md, and drawn
// into its headline table and chart.
package fanout

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// Config is one run: one implementation, one protocol mode, one size.
type Config struct {
	Scenario  string
	Impl      string
	Delta     bool
	Clients   int
	Services  int
	Endpoints int
	// Changes are applied one after the other, each waiting for the whole
	// fleet to converge, unless Rate is set: then changes are applied at
	// Rate per second for Duration, without waiting.
	Changes  int
	Rate     float64
	Duration time.Duration
	// ChangeBudget, if set, stops sequential changes once they have taken
	// that long (after at least minChanges), so that a slow baseline does
	// not hold the whole suite; Result.ChangesDone says how many ran.
	ChangeBudget time.Duration
	Reconnect    bool // after the changes, every client reconnects at once
	// Holdoff is passed to the server (xdsserver.Options.Holdoff): changes
	// are coalesced as the bridge's source manager does, and convergence
	// is measured from the change at the source, holdoff included.
	Holdoff    time.Duration
	MaxHoldoff time.Duration // bound of a batch's wait; zero: 10 × Holdoff
	// Streams, if positive, is passed to the server (xdsserver.Options.Streams):
	// the engine's limit of streams open at once, which a fleet larger than
	// its default needs raised. Zero keeps the engine's default.
	Streams int
	// GRPCBuffers, if positive, is passed to the server
	// (xdsserver.Options.GRPCBuffers): the size of gRPC's read and write
	// buffers of every implementation's connections. Zero keeps gRPC's.
	GRPCBuffers int
	// KeepaliveTimeout, if positive, is passed to the server
	// (xdsserver.Options.KeepaliveTimeout): every implementation's gRPC
	// keepalive timeout, which is also each connection's TCP_USER_TIMEOUT.
	// Zero keeps gRPC's.
	KeepaliveTimeout time.Duration
	// Timeout bounds the wait for one change; cold start and reconnect may
	// take ColdFactor times as long.
	Timeout time.Duration
	// ServerCPUs, if set, is the CPU list (taskset -c) the server runs
	// on, apart from the load generator's (SplitCPUs).
	ServerCPUs string
	// Rep numbers the repetitions of one configuration (0, 1, 2, ...).
	Rep int
	Bin string // the xdsload binary (runs `serve`)
	// ServerBin, if set, runs `serve` instead of Bin: an xdsload built
	// from another commit, so that servers of two commits meet the same
	// load generator. Impl is then IMPL@LABEL (see servedImpl).
	ServerBin string
	OutDir    string // profiles and server logs go here
	Logger    *slog.Logger
}

// measured is c without what does not change what a run measures: where
// its binary, profiles and log go.
func (c Config) measured() Config {
	c.Bin, c.ServerBin, c.OutDir, c.Logger = "", "", "", nil
	return c
}

// servedImpl is the implementation the server is asked for: Impl without
// the @LABEL that names the binary serving it (ServerBin).
func (c Config) servedImpl() string {
	impl, _, _ := strings.Cut(c.Impl, "@")
	return impl
}

// serverBin is the binary that runs the server: ServerBin if set, else Bin.
func (c Config) serverBin() string {
	if c.ServerBin != "" {
		return c.ServerBin
	}
	return c.Bin
}

// serverOptions is what the server process is started with: the
// implementation, the holdoff, the streams limit and the transport options.
func (c Config) serverOptions() xdsserver.Options {
	return xdsserver.Options{Impl: c.servedImpl(), Holdoff: c.Holdoff, MaxHoldoff: c.MaxHoldoff, Streams: c.Streams,
		GRPCBuffers: c.GRPCBuffers, KeepaliveTimeout: c.KeepaliveTimeout}
}

// Mode is "delta" or "sotw".
func (c Config) Mode() string {
	if c.Delta {
		return "delta"
	}
	return "sotw"
}

// ID names the run in file names and tables.
func (c Config) ID() string {
	id := fmt.Sprintf("%s-%s-%s-c%d-n%d", c.Scenario, c.Impl, c.Mode(), c.Clients, c.Services)
	if c.Rep > 0 {
		id += fmt.Sprintf("-r%d", c.Rep)
	}
	return id
}

// Result holds the figures of one run. Durations are in the units named.
type Result struct {
	Config
	ColdStart time.Duration // fleet start -> every client holds everything
	ColdCPU   time.Duration // server CPU during the cold start

	ChangesDone      int
	AchievedRate     float64       // changes/s actually posted (rate mode); below Rate when the driver or the server's apply is slower
	Flushes          int           // publishes the server made for the changes (fewer than changes with Holdoff)
	ConvP50, ConvP99 time.Duration // per change: until every client holds it
	ConvMax          time.Duration
	// Rate mode only: the p99 convergence of the changes of the first and
	// of the last quarter of the run (a backlog shows as the last well
	// above the first), and the longest a change was posted after its
	// scheduled time (the driver falling behind the rate it offers).
	ConvP99First, ConvP99Last time.Duration
	DriverLagMax              time.Duration
	ClientP50, ClientP99      time.Duration // per client·change
	CPUPerChange              time.Duration
	CPUPerClientChange        time.Duration
	BytesPerClientChange      float64
	ResPerClientChange        float64 // resources received per client·change
	LoadgenCPUPerChange       time.Duration

	HeapPerClient float64 // bytes of server heap in use per connected client
	RSSPerClient  float64
	// ServerRSS is the process RSS once quiet after the changes, when the
	// process's memory return policy has decided on their burst; and
	// ServerRSSBusy the RSS right after the changes, what a process under
	// steady churn keeps.
	ServerRSS     int64
	ServerRSSBusy int64
	PeakRSS       int64 // VmHWM of the server at the end of the run (load, cold start, changes, reconnect)
	// LoadgenPeakRSS is the load generator's VmHWM over the run (what the
	// fleet needs beside the server on one machine); it includes what the
	// process kept of earlier runs of the invocation.
	LoadgenPeakRSS int64

	ReconnectTime        time.Duration
	ReconnectCPU         time.Duration
	ReconnectBytesClient float64

	Failed  bool
	Problem string

	// Wall is the run's own wall time, server start to teardown: what it
	// adds to a suite. Zero for a run reused from another scenario.
	Wall time.Duration
}

// Run performs one run. An error means the rig failed; a run whose clients
// ended up wrong or timed out returns a Result with Failed set.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	log := cfg.Logger.With("run", cfg.ID())
	res = Result{Config: cfg}
	// The fleet lives in this process, and the previous run's (13 GB at
	// C=1,000, N=10,000) is garbage the collector has not necessarily
	// reached: collected now, it is not collected in the middle of this
	// run's cold start, and every run starts from the same heap.
	runtime.GC()
	xdsserver.ResetPeakRSS()
	defer func() { res.LoadgenPeakRSS = xdsserver.PeakRSS() }()
	srv, err := xdsserver.Start(ctx, cfg.serverBin(), cfg.serverOptions(), cfg.ServerCPUs, filepath.Join(cfg.OutDir, cfg.ID()+".server.log"))
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	spec := workload.Spec{Services: cfg.Services, Endpoints: cfg.Endpoints}
	if err := srv.Post(ctx, "/load", url.Values{"services": {strconv.Itoa(spec.Services)}, "endpoints": {strconv.Itoa(spec.Endpoints)}}); err != nil {
		return res, err
	}
	base, err := srv.Settled(ctx)
	if err != nil {
		return res, err
	}
	// The load is a burst to the server's memory policy too: once it has
	// returned it, its collection no longer falls into the cold start.
	if base, err = quietStats(ctx, srv, base, log); err != nil {
		return res, err
	}

	// Cold start, profiled apart from the changes: it is where the cost of
	// full initial states shows.
	if err := srv.Post(ctx, "/cpuprofile/start", url.Values{"path": {filepath.Join(cfg.OutDir, cfg.ID()+".cold.cpu.pprof")}}); err != nil {
		return res, err
	}
	start := time.Now()
	f, err := fleet.StartLoad(ctx, fleet.LoadOptions{Addr: srv.XDS, Spec: spec, Clients: cfg.Clients, Delta: cfg.Delta, Prefix: "envoy"})
	if err != nil {
		return res, err
	}
	defer func() { f.Close() }()
	last, err := f.WaitServed(ctx, ColdFactor*cfg.Timeout)
	if err != nil {
		res.Fail("cold start: %v", err)
		return res, nil
	}
	res.ColdStart = last.Sub(start)
	loaded, err := srv.Settled(ctx)
	if err != nil {
		return res, err
	}
	if err := srv.Post(ctx, "/cpuprofile/stop", nil); err != nil {
		return res, err
	}
	res.ColdCPU = loaded.CPU() - base.CPU()
	res.HeapPerClient = float64(int64(loaded.HeapInuse)-int64(base.HeapInuse)) / float64(cfg.Clients)
	res.RSSPerClient = float64(loaded.RSS-base.RSS) / float64(cfg.Clients)
	log.Info("cold start", "time", res.ColdStart, "heap/client", res.HeapPerClient, "fleet_live_heap", liveHeap())
	// Likewise the cold start's burst, before the changes are timed.
	if _, err := quietStats(ctx, srv, loaded, log); err != nil {
		return res, err
	}

	// Changes.
	w := workload.NewWorld(spec)
	if err := runChanges(ctx, cfg, srv, f, w, &res); err != nil {
		return res, err
	}
	if err := f.Validate(w); err != nil {
		res.Fail("validation: %v", err)
	}
	if err := srv.Post(ctx, "/heapprofile", url.Values{"path": {filepath.Join(cfg.OutDir, cfg.ID()+".heap.pprof")}}); err != nil {
		log.Warn("heap profile", "err", err)
	}
	if st, err := srv.Stats(ctx); err == nil {
		res.ServerRSSBusy = st.RSS
		logMemory(log, "server memory right after the changes", st)
		if st, err = quietStats(ctx, srv, st, log); err == nil && st.Reclaim.Settled {
			res.ServerRSS = st.RSS
			logMemory(log, "server memory once quiet", st)
			log.Info("load generator memory", "fleet_live_heap", liveHeap())
		}
	}

	if cfg.Reconnect && !res.Failed {
		f, err = reconnect(ctx, cfg, srv, f, w, &res)
		if err != nil {
			return res, err
		}
	}
	if st, err := srv.Stats(ctx); err == nil {
		res.PeakRSS = st.PeakRSS
	}
	return res, nil
}

const (
	minChanges = 5 // see Config.ChangeBudget
	// ColdFactor is how many times Config.Timeout a cold start may take.
	ColdFactor = 5
)

// Fail marks the result failed and adds the problem to its Problem.
func (r *Result) Fail(format string, args ...any) {
	r.Failed = true
	if r.Problem != "" {
		r.Problem += "; "
	}
	r.Problem += fmt.Sprintf(format, args...)
}

// logMemory logs what the server's RSS is made of.
func logMemory(log *slog.Logger, msg string, st xdsserver.Stats) {
	log.Info(msg, "rss", st.RSS, "heap_inuse", st.HeapInuse, "heap_retained", st.HeapSys-st.HeapReleased,
		"stacks", st.StackInuse, "goroutines", st.Goroutines, "memory_returns", st.Reclaim.Releases)
}

// quietStats waits until the server's memory return policy has sampled
// the allocation since from and decided on its quiet period (returned the
// burst's memory, or found it too small to), then returns the stats. It
// gives up after quietWait, returning the latest stats, unsettled: the
// caller then has no figure once quiet.
func quietStats(ctx context.Context, srv *xdsserver.Process, from xdsserver.Stats, log *slog.Logger) (xdsserver.Stats, error) {
	deadline := time.Now().Add(quietWait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := srv.Stats(ctx)
		if err != nil || st.Reclaim.Samples > from.Reclaim.Samples && st.Reclaim.Settled {
			return st, err
		}
		if time.Now().After(deadline) {
			log.Warn("the server's memory return policy did not settle: no RSS once quiet", "after", quietWait)
			return st, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// quietWait bounds quietStats: the policy decides Quiet after the last
// busy sample.
var quietWait = 5 * reclaim.DefaultPolicy.Quiet

func runChanges(ctx context.Context, cfg Config, srv *xdsserver.Process, f *fleet.Load, w *workload.World, res *Result) error {
	total := cfg.Changes
	var interval time.Duration
	if cfg.Rate > 0 {
		total = int(cfg.Rate * cfg.Duration.Seconds())
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	if total == 0 {
		return nil
	}
	prof := filepath.Join(cfg.OutDir, cfg.ID()+".cpu.pprof")
	if err := srv.Post(ctx, "/cpuprofile/start", url.Values{"path": {prof}}); err != nil {
		return err
	}
	s0, err := srv.Stats(ctx)
	if err != nil {
		return err
	}
	// The load generator's own profile over the same phase, next to the
	// server's: on shared CPUs the fleet's cost is half the picture.
	stopProf := profileSelf(filepath.Join(cfg.OutDir, cfg.ID()+".loadgen.cpu.pprof"), cfg.Logger)
	defer stopProf()
	c0, l0 := f.Stats(), proc.SelfCPU()
	all := make([]*fleet.Change, 0, total)
	if interval > 0 {
		if err := paced(ctx, cfg, srv, f, w, total, interval, &all, res); err != nil {
			return err
		}
	} else {
		want := make([]expected, total+1)
		began := time.Now()
		for k := 1; k <= total; k++ {
			if cfg.ChangeBudget > 0 && k > minChanges && time.Since(began) > cfg.ChangeBudget {
				total = k - 1
				break
			}
			var err error
			if want[k], err = expect(w, k); err != nil {
				return err
			}
			ts, err := post(ctx, srv, f, want, k, k)
			if err != nil {
				return err
			}
			all = append(all, ts...)
			ts[0].Wait(ctx, cfg.Timeout)
			f.Untrack(ts[0])
		}
	}
	c1, l1 := f.Stats(), proc.SelfCPU()
	stopProf()
	s1, err := srv.Stats(ctx)
	if err != nil {
		return err
	}
	if err := srv.Post(ctx, "/cpuprofile/stop", nil); err != nil {
		return err
	}

	var perChange, perClient []time.Duration
	timeouts := 0
	for _, t := range all {
		lat, ok := t.Latencies()
		perClient = append(perClient, lat...)
		if !ok {
			timeouts++
			continue
		}
		perChange = append(perChange, slices.Max(lat))
	}
	if timeouts > 0 {
		res.Fail("%d of %d changes did not reach every client within %s", timeouts, total, cfg.Timeout)
	}
	cc := float64(cfg.Clients * total)
	res.ChangesDone = total
	res.Flushes = s1.Flushes - s0.Flushes
	res.ConvP50, res.ConvP99, res.ConvMax = report.Pct(perChange, 50), report.Pct(perChange, 99), report.Pct(perChange, 100)
	if interval > 0 && timeouts == 0 {
		q := len(perChange) / 4
		res.ConvP99First, res.ConvP99Last = report.Pct(perChange[:q], 99), report.Pct(perChange[len(perChange)-q:], 99)
	}
	res.ClientP50, res.ClientP99 = report.Pct(perClient, 50), report.Pct(perClient, 99)
	cpu := s1.CPU() - s0.CPU()
	res.CPUPerChange = cpu / time.Duration(total)
	res.CPUPerClientChange = time.Duration(float64(cpu) / cc)
	res.BytesPerClientChange = float64(c1.Bytes-c0.Bytes) / cc
	res.ResPerClientChange = float64(c1.Resources-c0.Resources) / cc
	res.LoadgenCPUPerChange = (l1 - l0) / time.Duration(total)
	return nil
}

// paced posts changes 1..total at one per interval from now, without
// waiting for them to converge, and waits for all of them at the end. At
// each turn it posts every change whose time has come in one control call,
// so the rate it offers does not depend on one HTTP round trip per change
// (on 2 shared CPUs that round trip held the driver to about 360 changes/s).
// The server records or applies a call's changes as it would the same
// changes in separate calls, so every implementation gets the same load.
// Each change's convergence runs from just before the call that carries it.
// What a client must hold after each change is computed before the clock
// starts, so that the driver's own work per change does not slow the pace.
func paced(ctx context.Context, cfg Config, srv *xdsserver.Process, f *fleet.Load, w *workload.World, total int, interval time.Duration, all *[]*fleet.Change, res *Result) error {
	want := make([]expected, total+1)
	for k := 1; k <= total; k++ {
		var err error
		if want[k], err = expect(w, k); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	began := time.Now()
	for next := 1; next <= total; {
		if d := time.Until(began.Add(time.Duration(next-1) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		elapsed := time.Since(began)
		last := min(total, int(elapsed/interval)+1)
		lag := elapsed - time.Duration(next-1)*interval
		res.DriverLagMax = max(res.DriverLagMax, lag)
		t0 := time.Now()
		ts, err := post(ctx, srv, f, want, next, last)
		if err != nil {
			return err
		}
		if took := time.Since(t0); took > 100*time.Millisecond {
			cfg.Logger.Warn("slow change call", "run", cfg.ID(), "changes", len(ts), "took", took, "behind", lag)
		}
		*all = append(*all, ts...)
		// Changes overlap; each leaves the pending set as soon as it has
		// converged, so that every response is checked against the
		// changes in flight only.
		for _, t := range ts {
			wg.Go(func() {
				t.Wait(ctx, cfg.Timeout)
				f.Untrack(t)
			})
		}
		next = last + 1
	}
	res.AchievedRate = float64(total) / time.Since(began).Seconds()
	return nil
}

// expected is what a client holds once it has change k: assignment name
// with the given content hash.
type expected struct {
	name string
	hash uint64
}

// expect applies change k to w and returns what it makes clients hold.
func expect(w *workload.World, k int) (expected, error) {
	i := w.Apply(k)
	r, err := w.Spec.Build(i, k)
	if err != nil {
		return expected{}, err
	}
	h, err := envoysim.Hash(r.Assignment)
	return expected{workload.Name(i), h}, err
}

// post tracks changes from..to (inclusive; want[k] is what change k makes
// clients hold) and asks the server to apply them, in one call for up to
// maxPerCall changes.
func post(ctx context.Context, srv *xdsserver.Process, f *fleet.Load, want []expected, from, to int) ([]*fleet.Change, error) {
	ts := make([]*fleet.Change, 0, to-from+1)
	for from <= to {
		end := min(to, from+maxPerCall-1)
		q := make(url.Values, 1)
		for k := from; k <= end; k++ {
			q.Add("k", strconv.Itoa(k))
			ts = append(ts, f.Track(k, want[k].name, fleet.Holds(want[k].name, want[k].hash)))
		}
		if err := srv.Post(ctx, "/change", q); err != nil {
			return ts, err
		}
		from = end + 1
	}
	return ts, nil
}

// maxPerCall bounds the changes of one control call: Go's URL parser
// refuses a query of more than 10,000 parameters.
const maxPerCall = 1000

// reconnect closes every client and starts them again at once; delta
// clients list what they held (initial_resource_versions), as Envoy does.
func reconnect(ctx context.Context, cfg Config, srv *xdsserver.Process, f *fleet.Load, w *workload.World, res *Result) (*fleet.Load, error) {
	var versions []map[string]map[string]string
	var hashes []map[string]map[string]uint64
	if cfg.Delta {
		for _, c := range f.Clients {
			versions = append(versions, c.Versions())
			hashes = append(hashes, c.Hashes())
		}
	}
	f.Close()
	s0, err := srv.Settled(ctx)
	if err != nil {
		return f, err
	}
	peak := watchPeak(ctx, srv, filepath.Join(cfg.OutDir, cfg.ID()+".reconnect.heap.pprof"), cfg.Logger.With("run", cfg.ID()))
	defer peak.end()
	if err := srv.Post(ctx, "/cpuprofile/start", url.Values{"path": {filepath.Join(cfg.OutDir, cfg.ID()+".reconnect.cpu.pprof")}}); err != nil {
		return f, err
	}
	defer func() { _ = srv.Post(ctx, "/cpuprofile/stop", nil) }()
	start := time.Now()
	nf, err := fleet.StartLoad(ctx, fleet.LoadOptions{Addr: srv.XDS, Spec: w.Spec, Clients: cfg.Clients, Delta: cfg.Delta, Prefix: "envoy", Versions: versions, Hashes: hashes})
	if err != nil {
		return f, err
	}
	last, err := nf.WaitServed(ctx, ColdFactor*cfg.Timeout)
	if err != nil {
		res.Fail("reconnect: %v", err)
		return nf, nil
	}
	res.ReconnectTime = last.Sub(start)
	s1, err := srv.Settled(ctx)
	if err != nil {
		return nf, err
	}
	res.ReconnectCPU = s1.CPU() - s0.CPU()
	res.ReconnectBytesClient = float64(nf.Stats().Bytes) / float64(cfg.Clients)
	if err := nf.Validate(w); err != nil {
		res.Fail("validation after reconnect: %v", err)
	}
	return nf, nil
}

// profileSelf starts a CPU profile of this process written to path and
// returns what stops it (once; later calls do nothing). A failure (another profile running) is logged and
// the run goes on without it.
func profileSelf(path string, log *slog.Logger) (stop func()) {
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		log.Warn("load generator profile", "err", err)
		return func() {}
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}

// liveHeap is this process's heap marked live by the last garbage
// collection: what the fleet holds, apart from the collector's headroom.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
