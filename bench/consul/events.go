package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// EventsConfig is the Consul source's scenario: services × 3
// instances (two with passing TTL checks, one without) registered through
// a client agent joined to a server agent (or a single dev agent), churn
// of check-less instances on other services, and each kind of registry
// change timed until every client has it.
type EventsConfig struct {
	ConsulBin, BridgeBin string
	Topology             string // "cluster" (server + client agent) or "dev"
	Clients, Services    int
	Churn                float64 // unrelated registrations per second
	PerEvent             int     // repetitions of each event kind
	SourceYAML           string  // extra keys of the consul source, flow-style ("sweep_cached: false")
	// TLS gives the agents an HTTPS port and points the bridge at it.
	TLS bool
	// AgentHCL is configuration both agents get ("limits {
	// http_max_conns_per_client = 40 }").
	AgentHCL string
	// Idle is how long the server's reads are counted with nothing
	// changing, before the churn starts (0: not measured).
	Idle time.Duration
	// Baseline is how long the churn runs before the bridge starts, to
	// measure what the agents spend without it (0: not measured).
	Baseline time.Duration
	Timeout  time.Duration
	OutDir   string
	Logger   *slog.Logger // progress; nil: none
}

// EventsResult holds what the scenario measured.
type EventsResult struct {
	Config EventsConfig
	// Setup is the time the registrations took; FirstSync from the
	// bridge's start to its /readyz with the source synced
	// (xdsbridge_source_synced).
	Setup, FirstSync time.Duration
	// PeakConnsSync and PeakConnsEvents are the most ESTABLISHED
	// connections from the bridge to the agent's HTTP and HTTPS ports
	// (sampled every 50 ms) up to the end of the first sync and from then
	// to the end of the events.
	PeakConnsSync, PeakConnsEvents int
	// HTTPSProto is the protocol the agent's HTTPS API answered a Go
	// client with ("HTTP/2.0"), with TLS.
	HTTPSProto string
	Events     map[string][]time.Duration
	Missed     map[string]int
	// ServerRPC and ServerQueries are the server's consul_rpc_request and
	// consul_rpc_query (blocking reads among them) over Minutes of events
	// and churn; IdleRPC and IdleQueries the same over IdleMinutes with no
	// change at all.
	ServerRPC, ServerQueries float64
	Minutes                  float64
	IdleRPC, IdleQueries     float64
	IdleMinutes              float64
	// Churned counts the churn registrations, EventsMade the timed
	// changes made, both during Minutes.
	Churned    int64
	EventsMade int
	// BridgeFailures is the growth of the bridge's
	// xdsbridge_source_failures_total over the whole run (every failed
	// read, 429s among them). Bridge429 counts the lines of the bridge's
	// log that show a 429: the agent's connection limiter writes it on a
	// new connection before any request, and Go's HTTP/1.1 client logs
	// it as an "Unsolicited response ... 429 Too Many Requests" (the read
	// then fails as a closed connection), while a 429 that answers a
	// request shows in the source's failure message ("response code:
	// 429", logged once per failing period). So it is a lower bound; it is
	// 0 only if the agent refused nothing. The agent itself counts no 429
	// in its metrics.
	BridgeFailures float64
	Bridge429      int
	// Watches is the source's "watches" note in /sources at the end of
	// the events: how many services are watched and how long the last
	// sweep of the others took.
	Watches string
	// Baseline is the agents' load under churn before the bridge runs;
	// IdleLoad with the bridge and nothing changing; EventsLoad with the
	// bridge over the events and the churn.
	Baseline, IdleLoad, EventsLoad AgentLoad
}

// Instances is the number of instances per service.
const Instances = 3

// RunEvents runs the scenario. Every process it starts is stopped
// before it returns, also when ctx ends early (an interrupt).
func RunEvents(ctx context.Context, cfg EventsConfig) (*EventsResult, error) {
	res := &EventsResult{Config: cfg, Events: map[string][]time.Duration{}, Missed: map[string]int{}}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "xdsload-consul-events-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	top, capi, stop, err := StartLed(ctx, cfg, dir)
	defer stop()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := RegisterAll(ctx, capi, cfg); err != nil {
		return nil, err
	}
	res.Setup = time.Since(t0)
	log.Info("registered", "services", cfg.Services, "took", res.Setup.Round(time.Millisecond))
	if cfg.Baseline > 0 && cfg.Churn > 0 {
		if res.Baseline, err = measureBaseline(ctx, top, capi, cfg); err != nil {
			return nil, err
		}
		log.Info("baseline without the bridge", "agent_cpu", res.Baseline.AgentCPU, "server_cpu", res.Baseline.ServerCPU)
	}
	address, tlsYAML, xdsAddr, adminAddr, httpsProto, err := top.BridgeSide(cfg.TLS)
	if err != nil {
		return nil, err
	}
	res.HTTPSProto = httpsProto
	extra := ""
	if cfg.SourceYAML != "" {
		extra = ", " + cfg.SourceYAML
	}
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nlog: {level: warn}\nsources:\n"+
		"  - {name: consul, type: consul, address: %q%s, services: {include: [\"svc-*\"]}%s}\n",
		xdsAddr, adminAddr, address, tlsYAML, extra)
	conf := filepath.Join(cfg.OutDir, "consul-events.bridge.yaml")
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	start := time.Now()
	bridgeLog := filepath.Join(cfg.OutDir, "consul-events.bridge.log")
	bridge, err := proc.Start(bridgeLog, cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return nil, err
	}
	defer proc.Stop(bridge)
	sampler := newConnSampler(bridge.Process.Pid, portOf(top.Agent), portOf(top.AgentHTTPS))
	sctx, scancel := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	defer sampling.Wait()
	defer scancel()
	sampling.Go(func() { sampler.run(sctx) })
	if err := proc.Poll(ctx, 10*time.Minute, proc.BridgeSynced(adminAddr, "consul")); err != nil {
		return nil, fmt.Errorf("waiting for the bridge to be ready and the source synced: %w", err)
	}
	res.FirstSync = time.Since(start)
	res.PeakConnsSync = sampler.takePeak()
	log.Info("bridge ready", "took", res.FirstSync.Round(time.Millisecond), "peak_conns", res.PeakConnsSync)
	http.DefaultClient.CloseIdleConnections()

	spec := workload.Spec{Services: cfg.Services, Endpoints: Instances}
	f, err := fleet.StartLoad(ctx, fleet.LoadOptions{Addr: xdsAddr, Spec: spec, Clients: cfg.Clients, Delta: true, Prefix: "envoy", Full: true})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.WaitServed(ctx, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("clients served: %w", err)
	}
	log.Info("clients served", "clients", cfg.Clients)
	if cfg.Idle > 0 {
		i0, err := sampleAgents(top)
		if err != nil {
			return nil, err
		}
		if err := measureIdle(ctx, top.Server, cfg.Idle, res); err != nil {
			return nil, err
		}
		i1, err := sampleAgents(top)
		if err != nil {
			return nil, err
		}
		res.IdleLoad = loadBetween(i0, i1)
	}

	m0, err := consultest.Metrics(top.Server)
	if err != nil {
		return nil, err
	}
	e0, err := sampleAgents(top)
	if err != nil {
		return nil, err
	}
	log.Info("events and churn", "events", len(allConsulEvents())*cfg.PerEvent, "churn_per_s", cfg.Churn)
	t1 := time.Now()
	var churned atomic.Int64
	cctx, ccancel := context.WithCancel(ctx)
	var churning sync.WaitGroup
	if cfg.Churn > 0 {
		churning.Go(func() { churn(cctx, capi, cfg, &churned) })
	}
	runEvents(ctx, capi, f, cfg, res)
	ccancel()
	churning.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e1, err := sampleAgents(top)
	if err != nil {
		return nil, err
	}
	res.EventsLoad = loadBetween(e0, e1)
	m1, err := consultest.Metrics(top.Server)
	if err != nil {
		return nil, err
	}
	res.Minutes = time.Since(t1).Minutes()
	res.ServerRPC = m1["consul_rpc_request"] - m0["consul_rpc_request"]
	res.ServerQueries = m1["consul_rpc_query"] - m0["consul_rpc_query"]
	res.Churned = churned.Load()
	res.PeakConnsEvents = sampler.takePeak()
	if res.BridgeFailures, err = proc.ScrapeSample("http://"+adminAddr+"/metrics", `xdsbridge_source_failures_total{source="consul"}`); err != nil {
		return nil, err
	}
	res.Bridge429 = countLines(bridgeLog, "429 Too Many Requests", "response code: 429")
	if res.Watches, err = sourceNote(adminAddr, "consul", "watches"); err != nil {
		res.Watches = "not read: " + err.Error() // informative: it does not fail the run
	}
	scancel()
	sampling.Wait()
	return res, os.WriteFile(filepath.Join(cfg.OutDir, "consul-events.conns.txt"), []byte(sampler.report()+"\n"), 0o644)
}

// measureBaseline runs the churn alone for cfg.Baseline and returns what
// the agents spent.
func measureBaseline(ctx context.Context, top *Topology, c *api.Client, cfg EventsConfig) (AgentLoad, error) {
	a, err := sampleAgents(top)
	if err != nil {
		return AgentLoad{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.Baseline)
	defer cancel()
	var n atomic.Int64
	churn(cctx, c, cfg, &n)
	if err := ctx.Err(); err != nil {
		return AgentLoad{}, err
	}
	b, err := sampleAgents(top)
	return loadBetween(a, b), err
}

// measureIdle counts the server's reads while nothing changes.
func measureIdle(ctx context.Context, server string, d time.Duration, res *EventsResult) error {
	m0, err := consultest.Metrics(server)
	if err != nil {
		return err
	}
	t0 := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	m1, err := consultest.Metrics(server)
	if err != nil {
		return err
	}
	res.IdleMinutes = time.Since(t0).Minutes()
	res.IdleRPC = m1["consul_rpc_request"] - m0["consul_rpc_request"]
	res.IdleQueries = m1["consul_rpc_query"] - m0["consul_rpc_query"]
	return nil
}

// loadMarkdown renders the agents' CPU and the GETs they served.
func (r *EventsResult) loadMarkdown() string {
	var b strings.Builder
	ev, base := r.EventsLoad, r.Baseline
	if ev.Seconds == 0 {
		return ""
	}
	who := "client agent (the bridge's)"
	if r.Config.Topology == "dev" {
		who = "dev agent"
	}
	fmt.Fprintf(&b, "- %s CPU: %.1f%% of a core over the events and churn (%.0f s)", who, 100*ev.AgentCPU, ev.Seconds)
	if base.Seconds > 0 {
		fmt.Fprintf(&b, ", %.1f%% under the same churn without the bridge (%.0f s): the bridge adds %.1f%%",
			100*base.AgentCPU, base.Seconds, 100*(ev.AgentCPU-base.AgentCPU))
	}
	b.WriteString("\n")
	if r.Config.Topology != "dev" {
		fmt.Fprintf(&b, "- server agent CPU: %.1f%% of a core over the events and churn", 100*ev.ServerCPU)
		if base.Seconds > 0 {
			fmt.Fprintf(&b, ", %.1f%% without the bridge: the bridge adds %.1f%%", 100*base.ServerCPU, 100*(ev.ServerCPU-base.ServerCPU))
		}
		b.WriteString("\n")
	}
	if il := r.IdleLoad; il.Seconds > 0 {
		fmt.Fprintf(&b, "- with the bridge and nothing changing (%.0f s): %s CPU %.1f%% of a core, %.1f GETs/s (%s)\n",
			il.Seconds, who, 100*il.AgentCPU, il.TotalGETs()/il.Seconds, il.describe())
	}
	fmt.Fprintf(&b, "- GETs the %s served over the events and churn: %.0f (%.0f/s): %s", who, ev.TotalGETs(), ev.TotalGETs()/ev.Seconds, ev.describe())
	if base.Seconds > 0 {
		fmt.Fprintf(&b, "; %.0f without the bridge", base.TotalGETs())
	}
	b.WriteString("\n")
	return b.String()
}

// portOf is the port of host:port, 0 for "".
func portOf(addr string) int {
	p, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	return p
}

// sourceNote returns the note key of the named source in the bridge's
// /sources ("" when it has none).
func sourceNote(adminAddr, source, key string) (string, error) {
	resp, err := http.Get("http://" + adminAddr + "/sources")
	if err != nil {
		return "", fmt.Errorf("reading /sources: %w", err)
	}
	defer resp.Body.Close()
	var all []sources.StatusSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return "", fmt.Errorf("decoding /sources: %w", err)
	}
	for _, s := range all {
		if s.Name == source {
			return s.Notes[key], nil
		}
	}
	return "", fmt.Errorf("/sources lists no source %q", source)
}

// countLines counts the lines of a file that contain any of subs.
func countLines(path string, subs ...string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(line, s) }) {
			n++
		}
	}
	return n
}

// consulEvent is one kind of registry change: do makes it on service i,
// done tells a client that holds it.
type consulEvent struct {
	name string
	do   func(c *api.Client, i int) error
	done func(i int) func(*envoysim.Client) bool
}

// has: a client holds the endpoint on port of service i, with health h.
func has(port int, h corev3.HealthStatus) func(i int) func(*envoysim.Client) bool {
	return func(i int) func(*envoysim.Client) bool {
		return func(c *envoysim.Client) bool { got, ok := healthAt(c, workload.Name(i), port); return ok && got == h }
	}
}

// lacks: a client holds no endpoint on port of service i.
func lacks(port int) func(i int) func(*envoysim.Client) bool {
	return func(i int) func(*envoysim.Client) bool {
		return func(c *envoysim.Client) bool { _, ok := healthAt(c, workload.Name(i), port); return !ok }
	}
}

func consulEvents() []consulEvent {
	id := func(i, j int) string { return fmt.Sprintf("%s-%d", workload.Name(i), j) }
	ttl := func(status string) func(c *api.Client, i int) error {
		return func(c *api.Client, i int) error { return c.Agent().UpdateTTL(id(i, 0)+"-ttl", "", status) }
	}
	maint := func(on bool) func(c *api.Client, i int) error {
		return func(c *api.Client, i int) error {
			if on {
				return c.Agent().EnableServiceMaintenance(id(i, 0), "bench")
			}
			return c.Agent().DisableServiceMaintenance(id(i, 0))
		}
	}
	H := corev3.HealthStatus_HEALTHY
	return []consulEvent{
		{"healthy instance deregistered", func(c *api.Client, i int) error { return c.Agent().ServiceDeregister(id(i, 1)) }, lacks(basePort(1))},
		{"instance added, passing", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(Instance(i, 3, 8003, true)) }, has(8003, H)},
		{"instance added without checks", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(Instance(i, 4, 8004, false)) }, has(8004, H)},
		{"port change by re-registration", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(Instance(i, 2, 8102, false)) }, has(8102, H)},
		{"check critical", ttl(api.HealthCritical), has(basePort(0), corev3.HealthStatus_UNHEALTHY)},
		{"check passing again", ttl(api.HealthPassing), has(basePort(0), H)},
		{"maintenance on", maint(true), has(basePort(0), corev3.HealthStatus_DRAINING)},
		{"maintenance off", maint(false), has(basePort(0), H)},
		{"whole service deregistered", func(c *api.Client, i int) error {
			for _, j := range []int{0, 2, 3, 4} {
				if err := c.Agent().ServiceDeregister(id(i, j)); err != nil {
					return err
				}
			}
			return nil
		}, func(i int) func(*envoysim.Client) bool {
			return func(c *envoysim.Client) bool {
				cla, _ := c.Resource(envoysim.EndpointType, workload.Name(i)).(*endpointv3.ClusterLoadAssignment)
				return cla != nil && len(cla.GetEndpoints()) == 0
			}
		}},
	}
}

// allConsulEvents is every kind of change the scenario times.
func allConsulEvents() []consulEvent { return append(consulEvents(), unwatchedEvents()...) }

// unwatchedEvents are the kinds of change that no filtered check shows,
// each made as the first change of a service no event touched before
// (unwatchedTarget): a service of the first half written by the catalog
// sync and never changed since, which by then has no watch over plain
// HTTP (the watches went to the services that changed last). They are
// made through the catalog API on the service's sync node, as a catalog
// sync would make them.
func unwatchedEvents() []consulEvent {
	id := func(i, j int) string { return fmt.Sprintf("%s-%d", workload.Name(i), j) }
	// onNode registers or deregisters on the node that holds service i.
	onNode := func(c *api.Client, i int, f func(node string) error) error {
		entries, _, err := c.Catalog().Service(workload.Name(i), "", nil)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			return fmt.Errorf("%s has no instance", workload.Name(i))
		}
		return f(entries[0].Node)
	}
	add := func(j, port int, checked bool) func(c *api.Client, i int) error {
		return func(c *api.Client, i int) error {
			return onNode(c, i, func(node string) error {
				r := Instance(i, j, port, false)
				reg := &api.CatalogRegistration{Node: node, SkipNodeUpdate: true,
					Service: &api.AgentService{ID: r.ID, Service: r.Name, Address: r.Address, Port: r.Port}}
				if checked {
					reg.Check = &api.AgentCheck{Node: node, CheckID: r.ID + "-check", Name: "bench", Status: api.HealthPassing, ServiceID: r.ID}
				}
				_, err := c.Catalog().Register(reg, nil)
				return err
			})
		}
	}
	return []consulEvent{
		{"unwatched: healthy instance deregistered", func(c *api.Client, i int) error {
			return onNode(c, i, func(node string) error {
				_, err := c.Catalog().Deregister(&api.CatalogDeregistration{Node: node, ServiceID: id(i, 1)}, nil)
				return err
			})
		}, lacks(basePort(1))},
		{"unwatched: instance added, passing", add(3, 8003, true), has(8003, corev3.HealthStatus_HEALTHY)},
		{"unwatched: instance added without checks", add(4, 8004, false), has(8004, corev3.HealthStatus_HEALTHY)},
		{"unwatched: port change by re-registration", add(2, 8102, false), has(8102, corev3.HealthStatus_HEALTHY)},
	}
}

// unwatchedTarget is the service the k-th kind of unwatchedEvents changes
// in round n: one of the first half that no other event changes.
func unwatchedTarget(n, k int, cfg EventsConfig) int {
	half := max(1, cfg.Services/2)
	targets := map[int]bool{}
	for m := range cfg.PerEvent {
		targets[eventTarget(m, cfg.Services)] = true
	}
	// The m-th service of the first half that is not an event target.
	m := n*len(unwatchedEvents()) + k
	for i := range half {
		j := (i*104729 + 5) % half
		if targets[j] {
			continue
		}
		if m == 0 {
			return j
		}
		m--
	}
	return -1
}

// runEvents makes every kind of change on PerEvent services of the first
// half, in the order of consulEvents on each service (each builds on the
// one before), then each kind of unwatchedEvents on a service of its own,
// timing each until every client has it; it stops when ctx ends.
func runEvents(ctx context.Context, c *api.Client, f *fleet.Load, cfg EventsConfig, res *EventsResult) {
	k := 0
	timed := func(ev consulEvent, i int) {
		k++
		res.EventsMade++
		t := f.Track(k, "", ev.done(i))
		if err := ev.do(c, i); err != nil {
			f.Untrack(t)
			res.Missed[ev.name]++
			return
		}
		t.Wait(ctx, cfg.Timeout)
		f.Untrack(t)
		lat, ok := t.Latencies()
		if !ok {
			res.Missed[ev.name]++
			return
		}
		res.Events[ev.name] = append(res.Events[ev.name], slices.Max(lat))
	}
	for n := range cfg.PerEvent {
		i := eventTarget(n, cfg.Services)
		for _, ev := range consulEvents() {
			if ctx.Err() != nil {
				return
			}
			timed(ev, i)
		}
	}
	for n := range cfg.PerEvent {
		for kind, ev := range unwatchedEvents() {
			i := unwatchedTarget(n, kind, cfg)
			if ctx.Err() != nil || i < 0 {
				return
			}
			timed(ev, i)
		}
	}
}

// healthAt returns the health of the endpoint on port of a held
// assignment.
func healthAt(c *envoysim.Client, name string, port int) (corev3.HealthStatus, bool) {
	cla, _ := c.Resource(envoysim.EndpointType, name).(*endpointv3.ClusterLoadAssignment)
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if int(e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()) == port {
				return e.GetHealthStatus(), true
			}
		}
	}
	return 0, false
}

// Markdown renders the result: the costs, then a table with a row per
// event kind.
func (r *EventsResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	transport := "HTTP/1.1 (plain HTTP)"
	if c.TLS {
		transport = "HTTPS, the agent answers " + r.HTTPSProto
	}
	fmt.Fprintf(&b, "topology %s, %d services × %d instances, %d delta clients, churn %.0f/s, %d of each event, bridge to agent over %s\n\n",
		c.Topology, c.Services, Instances, c.Clients, c.Churn, c.PerEvent, transport)
	fmt.Fprintf(&b, "source {%s}; agents' extra HCL: %q\n\n", c.SourceYAML, c.AgentHCL)
	fmt.Fprintf(&b, "- registration of %d services: %v\n", c.Services, r.Setup.Round(time.Millisecond))
	fmt.Fprintf(&b, "- first sync (bridge start → ready and source synced): %v\n", r.FirstSync.Round(time.Millisecond))
	fmt.Fprintf(&b, "- peak ESTABLISHED connections bridge → agent: %d during the first sync, %d after it\n", r.PeakConnsSync, r.PeakConnsEvents)
	fmt.Fprintf(&b, "- bridge read failures (xdsbridge_source_failures_total, whole run): %.0f; 429s in the bridge's log: %d\n", r.BridgeFailures, r.Bridge429)
	if r.IdleMinutes > 0 {
		fmt.Fprintf(&b, "- server reads with nothing changing: consul_rpc_request %.0f (%.0f/min), consul_rpc_query %.0f (%.0f/min) over %.1f min\n",
			r.IdleRPC, r.IdleRPC/r.IdleMinutes, r.IdleQueries, r.IdleQueries/r.IdleMinutes, r.IdleMinutes)
	}
	changes := float64(r.Churned) + float64(r.EventsMade)
	fmt.Fprintf(&b, "- server reads under churn: consul_rpc_request %.0f (%.0f/min), consul_rpc_query %.0f (%.0f/min) over %.1f min\n",
		r.ServerRPC, r.ServerRPC/r.Minutes, r.ServerQueries, r.ServerQueries/r.Minutes, r.Minutes)
	fmt.Fprintf(&b, "- registry changes in that window: %d churn + %d timed = %.0f; per change: %.2f consul_rpc_request, %.2f consul_rpc_query\n",
		r.Churned, r.EventsMade, changes, r.ServerRPC/max(changes, 1), r.ServerQueries/max(changes, 1))
	if r.Watches != "" {
		fmt.Fprintf(&b, "- the source's watches at the end (/sources): %s\n", r.Watches)
	}
	b.WriteString(r.loadMarkdown())
	b.WriteString("\n")
	b.WriteString("| event | n | p50 | p99 | max | missed |\n|---|---|---|---|---|---|\n")
	for _, ev := range allConsulEvents() {
		l := r.Events[ev.name]
		if len(l) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | – | – | – | %d |\n", ev.name, r.Missed[ev.name])
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %v | %d |\n", ev.name, len(l), report.Pct(l, 50).Round(time.Millisecond),
			report.Pct(l, 99).Round(time.Millisecond), report.Pct(l, 100).Round(time.Millisecond), r.Missed[ev.name])
	}
	return b.String()
}
