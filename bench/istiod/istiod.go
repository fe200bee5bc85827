package istiod

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/fanout"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/xdsserver"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

// Config is the Istio serving scenario: the bridge's engine serving
// its Istio collections in one shape (a xdsserver.IstioImpls server in its
// own process, `<Bin> serve`), the workload's services translated for
// Istio, one istiod-like client (test/istiodsim, Light: it ACKs and
// counts bytes without decoding resources) in this process, and one
// instance change (a weight) at Rate per second for Duration.
type Config struct {
	Bin       string // the xdsload binary (runs `serve`)
	Impl      string // one of xdsserver.IstioImpls
	Services  int
	Instances int // per service
	Rate      float64
	Duration  time.Duration
	// Idle is how long the server's CPU is read with nothing changing,
	// before the changes (0: not measured).
	Idle time.Duration
	// Holdoff is passed to the server (xdsserver.Options.Holdoff); latency
	// is measured from the change at the source, holdoff included.
	Holdoff time.Duration
	Timeout time.Duration // bound of the initial sync and of one push
	Rep     int
	OutDir  string // the server's log goes here
	Logger  *slog.Logger
}

// Result is what one run measured.
type Result struct {
	Config Config
	// InitialBytes is the size of the first response of the collection
	// that carries the endpoints (istiod's initial sync of it).
	InitialBytes int
	// Changes were applied over Window; Pushes responses of any kind
	// reached the client in it, PushBytes their size, and Endpoint of
	// them carried the collection with the endpoints.
	Changes, Pushes, Endpoint int
	PushBytes                 int64
	Window                    time.Duration
	// ServerCPU is the server process's user and system time over Window
	// (getrusage in that process); ClientCPU this process's, which is the
	// client's and the driver's (a few HTTP calls).
	ServerCPU, ClientCPU time.Duration
	// ServerSys is the system (kernel) part of ServerCPU: the socket
	// writes, mostly.
	ServerSys time.Duration
	// IdleCPU is the server's CPU over Config.Idle with nothing changing.
	IdleCPU time.Duration
	// GCs and Releases are the server's garbage collections and memory
	// returns (its reclaim policy, two collections each) over Window.
	GCs, Releases int
	// Latencies are, per change, from the change's request to the server
	// to the client's receipt of the response that carries it.
	Latencies []time.Duration
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end.
	LoadBefore, LoadAfter string
	Problem               string
}

// endpointCollection is the type URL (as istiod asks for it) of the
// collection an instance change re-sends in impl's shape, and how many
// resources it holds for services × instances.
func endpointCollection(impl string, services, instances int) (string, int) {
	if impl == "istio-workload_entries" {
		return istio.WorkloadEntry.TypeURLs()[0], services * instances
	}
	return istio.ServiceEntry.TypeURLs()[0], services
}

// Run runs the scenario once. Every process it starts is stopped
// before it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if !slices.Contains(xdsserver.IstioImpls, cfg.Impl) {
		return nil, fmt.Errorf("implementation %q does not serve istiod (want one of %v)", cfg.Impl, xdsserver.IstioImpls)
	}
	res := &Result{Config: cfg, LoadBefore: proc.LoadLine()}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv, err := xdsserver.Start(ctx, cfg.Bin, xdsserver.Options{Impl: cfg.Impl, Holdoff: cfg.Holdoff}, "",
		filepath.Join(cfg.OutDir, fmt.Sprintf("istiod.%s.%d.server.log", cfg.Impl, cfg.Rep)))
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if err := srv.Post(ctx, "/load", url.Values{"services": {strconv.Itoa(cfg.Services)}, "endpoints": {strconv.Itoa(cfg.Instances)}}); err != nil {
		return nil, err
	}
	client, err := istiodsim.Connect(srv.XDS, istiodsim.Options{Light: true})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	typeURL, want := endpointCollection(cfg.Impl, cfg.Services, cfg.Instances)
	// ofType returns the responses of the endpoint collection.
	ofType := func() []istiodsim.Response {
		var out []istiodsim.Response
		for _, r := range client.Responses() {
			if r.TypeURL == typeURL {
				out = append(out, r)
			}
		}
		return out
	}
	wctx, cancel := context.WithTimeout(ctx, fanout.ColdFactor*cfg.Timeout)
	err = client.WaitFor(wctx, func() bool { return client.Synced() && len(ofType()) > 0 && ofType()[0].Count == want })
	cancel()
	if err != nil {
		return nil, fmt.Errorf("initial sync of %d resources of %s: %w; received %+v", want, typeURL, err, ofType())
	}
	res.InitialBytes = ofType()[0].Bytes
	log.Info("istiod synced", "impl", cfg.Impl, "collection", typeURL, "bytes", res.InitialBytes)

	s0, err := srv.Settled(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Idle > 0 {
		select {
		case <-time.After(cfg.Idle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s1, err := srv.Stats(ctx)
		if err != nil {
			return nil, err
		}
		res.IdleCPU = s1.CPU() - s0.CPU()
	}

	period := time.Duration(float64(time.Second) / cfg.Rate)
	total := max(1, int(cfg.Duration.Seconds()*cfg.Rate))
	before := len(client.Responses())
	// The server's profile over the changes tells where its time went.
	prof := filepath.Join(cfg.OutDir, fmt.Sprintf("istiod.%s.%d.cpu.pprof", cfg.Impl, cfg.Rep))
	if err := srv.Post(ctx, "/cpuprofile/start", url.Values{"path": {prof}}); err != nil {
		return nil, err
	}
	s0, err = srv.Stats(ctx)
	if err != nil {
		return nil, err
	}
	c0, start := proc.SelfCPU(), time.Now()
	for k := 1; k <= total; k++ {
		if err := sleepUntil(ctx, start.Add(time.Duration(k-1)*period)); err != nil {
			return nil, err
		}
		n := len(ofType())
		t0 := time.Now()
		if err := srv.Post(ctx, "/change", url.Values{"k": {strconv.Itoa(k)}}); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		err := client.WaitFor(wctx, func() bool { return len(ofType()) > n })
		cancel()
		if err != nil {
			res.Problem = fmt.Sprintf("change %d did not reach the client within %v: %v", k, cfg.Timeout, err)
			break
		}
		got := ofType()[n]
		if got.Count != want {
			res.Problem = fmt.Sprintf("change %d: the response had %d resources of %s, want %d", k, got.Count, typeURL, want)
			break
		}
		res.Latencies = append(res.Latencies, got.Received.Sub(t0))
		res.Changes = k
	}
	// The window ends a period after the last change, so that each
	// change is charged one whole period of the server's time, what it
	// spends after the push (collection, memory return) included.
	if err := sleepUntil(ctx, start.Add(time.Duration(res.Changes)*period)); err != nil {
		return nil, err
	}
	s1, err := srv.Stats(ctx)
	if err != nil {
		return nil, err
	}
	if err := srv.Post(ctx, "/cpuprofile/stop", nil); err != nil {
		return nil, err
	}
	res.Window, res.ClientCPU, res.ServerCPU = time.Since(start), proc.SelfCPU()-c0, s1.CPU()-s0.CPU()
	res.ServerSys = time.Duration(s1.SysNs - s0.SysNs)
	res.GCs, res.Releases = int(s1.GCs-s0.GCs), s1.Reclaim.Releases-s0.Reclaim.Releases
	for _, r := range client.Responses()[before:] {
		res.Pushes++
		res.PushBytes += int64(r.Bytes)
		if r.TypeURL == typeURL {
			res.Endpoint++
		}
	}
	res.LoadAfter = proc.LoadLine()
	return res, nil
}

// sleepUntil sleeps until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// perChange is d per change applied (0 for none).
func (r *Result) perChange(d time.Duration) time.Duration {
	if r.Changes == 0 {
		return 0
	}
	return d / time.Duration(r.Changes)
}

// aboveIdle is the server's CPU per change above what it spends idle over
// the same time.
func (r *Result) aboveIdle() time.Duration {
	if r.Config.Idle <= 0 {
		return r.perChange(r.ServerCPU)
	}
	idle := time.Duration(float64(r.IdleCPU) * float64(r.Window) / float64(r.Config.Idle))
	return r.perChange(r.ServerCPU - idle)
}

// bytesPerPush is the mean size of the pushes of the window.
func (r *Result) bytesPerPush() float64 {
	if r.Pushes == 0 {
		return 0
	}
	return float64(r.PushBytes) / float64(r.Pushes)
}

// Line is one run's figures, on one line.
func (r *Result) Line() string {
	c := r.Config
	s := fmt.Sprintf("%s run %d: %d×%d, %d changes at %g/s over %s: server CPU %s per change (system %s; %s above idle; idle %s over %s), "+
		"client CPU %s per change; server %d GCs, %d memory returns; %d pushes (%d of the endpoint collection), %.0f B per push, initial %d B; "+
		"change to received p50 %s p99 %s max %s; load average %s -> %s",
		c.Impl, c.Rep, c.Services, c.Instances, r.Changes, c.Rate, r.Window.Round(time.Millisecond),
		report.MS(r.perChange(r.ServerCPU)), report.MS(r.perChange(r.ServerSys)), report.MS(r.aboveIdle()), report.MS(r.IdleCPU), c.Idle,
		report.MS(r.perChange(r.ClientCPU)), r.GCs, r.Releases, r.Pushes, r.Endpoint, r.bytesPerPush(), r.InitialBytes,
		report.MS(report.Pct(r.Latencies, 50)), report.MS(report.Pct(r.Latencies, 99)), report.MS(report.Pct(r.Latencies, 100)), r.LoadBefore, r.LoadAfter)
	if r.Problem != "" {
		s += "; FAILED: " + r.Problem
	}
	return s
}

// Summary is a Markdown table of runs, one row per implementation
// (in order of first appearance): the median of each figure over its runs,
// with the range.
func Summary(rs []*Result) string {
	var b strings.Builder
	b.WriteString("| shape | runs | server CPU per change | above idle | client CPU per change | bytes per push | pushes per change | change to received p50 | p99 | max | load average (1 min) |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var order []string
	by := map[string][]*Result{}
	for _, r := range rs {
		if _, ok := by[r.Config.Impl]; !ok {
			order = append(order, r.Config.Impl)
		}
		by[r.Config.Impl] = append(by[r.Config.Impl], r)
	}
	fig := func(runs []*Result, f func(*Result) float64) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = f(r)
		}
		return out
	}
	dur := func(v float64) string { return report.MS(time.Duration(v)) }
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	two := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	one := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, impl := range order {
		runs := by[impl]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			strings.TrimPrefix(impl, "istio-"), len(runs),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(r.perChange(r.ServerCPU)) }), dur),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(r.aboveIdle()) }), dur),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(r.perChange(r.ClientCPU)) }), dur),
			report.Spread(fig(runs, (*Result).bytesPerPush), num),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(r.Pushes) / float64(max(1, r.Changes)) }), two),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(report.Pct(r.Latencies, 50)) }), dur),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(report.Pct(r.Latencies, 99)) }), dur),
			report.Spread(fig(runs, func(r *Result) float64 { return float64(report.Pct(r.Latencies, 100)) }), dur),
			report.Spread(fig(runs, func(r *Result) float64 { return proc.LoadOf(r.LoadBefore) }), one))
	}
	return b.String()
}
