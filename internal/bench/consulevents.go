package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
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

	"github.com/xdsbridge/xdsbridge/internal/bench/workload"
	"github.com/xdsbridge/xdsbridge/internal/consultest"
	"github.com/xdsbridge/xdsbridge/internal/envoysim"
)

// ConsulEventsConfig is the Consul source's scenario: services × 3
// instances (two with passing TTL checks, one without) registered through
// a client agent joined to a server agent (or a single dev agent), churn
// of check-less instances on other services, and each kind of registry
// change timed until every client has it.
type ConsulEventsConfig struct {
	ConsulBin, BridgeBin string
	Topology             string // "cluster" (server + client agent) or "dev"
	Clients, Services    int
	Churn                float64 // unrelated registrations per second
	PerEvent             int     // repetitions of each event kind
	SourceYAML           string  // extra keys of the consul source, flow-style ("sweep_cached: false")
	Timeout              time.Duration
	OutDir               string
}

// ConsulEventsResult holds what the scenario measured.
type ConsulEventsResult struct {
	Config        ConsulEventsConfig
	FirstSync     time.Duration // bridge start to /readyz
	PeakConns     int           // bridge connections to the agent, sampled every 50 ms
	Events        map[string][]time.Duration
	Missed        map[string]int
	ServerRPC     float64 // consul_rpc_request on the server during the events
	ServerQueries float64 // consul_rpc_query (blocking) among them
	Minutes       float64
	Churned       int64
	HTTP429       float64
}

// consulInstances is the number of instances per service.
const consulInstances = 3

// RunConsulEvents runs the scenario.
func RunConsulEvents(ctx context.Context, cfg ConsulEventsConfig) (*ConsulEventsResult, error) {
	res := &ConsulEventsResult{Config: cfg, Events: map[string][]time.Duration{}, Missed: map[string]int{}}
	dir, err := os.MkdirTemp("", "xdsload-consul-events-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	server, agentAddr, stop, err := startConsulTopology(cfg, dir)
	defer stop()
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, MaxConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	capi, err := api.NewClient(&api.Config{Address: agentAddr, Transport: tr, HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	if err := poll(ctx, 60*time.Second, func() bool { l, err := capi.Status().Leader(); return err == nil && l != "" }); err != nil {
		return nil, fmt.Errorf("waiting for a Consul leader: %w", err)
	}
	if err := registerAll(capi, cfg); err != nil {
		return nil, err
	}

	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	xdsAddr, adminAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	extra := ""
	if cfg.SourceYAML != "" {
		extra = ", " + cfg.SourceYAML
	}
	conf := filepath.Join(dir, "bridge.yaml")
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nlog: {level: warn}\nsources:\n"+
		"  - {name: consul, type: consul, address: %q, services: {include: [\"svc-*\"]}, guard: {max_removed_fraction: 1}%s}\n",
		xdsAddr, adminAddr, agentAddr, extra)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	start := time.Now()
	bridge, err := startProc(filepath.Join(cfg.OutDir, "consul-events.bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return nil, err
	}
	defer stopProc(bridge)
	agentPort := agentAddr[strings.LastIndexByte(agentAddr, ':')+1:]
	var peak atomic.Int64
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(connsTo(bridge.Process.Pid, agentPort)); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	if err := poll(ctx, 10*time.Minute, bridgeReady(adminAddr)); err != nil {
		return nil, fmt.Errorf("waiting for the bridge to be ready: %w", err)
	}
	res.FirstSync = time.Since(start)
	http.DefaultClient.CloseIdleConnections()

	spec := workload.Spec{Services: cfg.Services, Endpoints: consulInstances}
	f, err := startFleet(ctx, fleetOptions{addr: xdsAddr, spec: spec, clients: cfg.Clients, delta: true, prefix: "envoy", full: true})
	if err != nil {
		return nil, err
	}
	defer f.close()
	if _, err := f.waitServed(ctx, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("clients served: %w", err)
	}

	m0, err := consultest.Metrics(server)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var churned atomic.Int64
	var wg sync.WaitGroup
	if cfg.Churn > 0 {
		wg.Go(func() { churn(sctx, capi, cfg, &churned) })
	}
	runEvents(ctx, capi, f, cfg, res)
	scancel()
	wg.Wait()
	m1, err := consultest.Metrics(server)
	if err != nil {
		return nil, err
	}
	res.Minutes = time.Since(t0).Minutes()
	res.ServerRPC = m1["consul_rpc_request"] - m0["consul_rpc_request"]
	res.ServerQueries = m1["consul_rpc_query"] - m0["consul_rpc_query"]
	res.Churned = churned.Load()
	res.PeakConns = int(peak.Load())
	if ma, err := consultest.Metrics(agentAddr); err == nil {
		for k, v := range ma {
			if strings.HasPrefix(k, "consul_http_request") && strings.Contains(k, `code="429"`) {
				res.HTTP429 += v
			}
		}
	}
	return res, nil
}

// startConsulTopology starts the agents; it returns the server's and the
// agent's (the one the bridge talks to) HTTP addresses.
func startConsulTopology(cfg ConsulEventsConfig, dir string) (server, agent string, stop func(), err error) {
	var procs []func()
	stop = func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i]()
		}
	}
	hcl := filepath.Join(dir, "telemetry.hcl")
	if err := os.WriteFile(hcl, []byte(consultest.Telemetry+"\nperformance { raft_multiplier = 1 }\n"), 0o600); err != nil {
		return "", "", stop, err
	}
	start := func(name string, args ...string) (string, string, error) {
		p, err := freePorts(6)
		if err != nil {
			return "", "", err
		}
		args = append(args, "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
			"-node", name, "-data-dir", filepath.Join(dir, name), "-log-level", "warn", "-config-file", hcl,
			"-http-port", strconv.Itoa(p[0]), "-https-port", "-1", "-dns-port", "-1",
			"-serf-lan-port", strconv.Itoa(p[1]), "-serf-wan-port", strconv.Itoa(p[2]),
			"-server-port", strconv.Itoa(p[3]), "-grpc-port", strconv.Itoa(p[4]), "-grpc-tls-port", strconv.Itoa(p[5]))
		cmd, err := startProc(filepath.Join(cfg.OutDir, "consul-events."+name+".log"), cfg.ConsulBin, args...)
		if err != nil {
			return "", "", err
		}
		procs = append(procs, func() { stopProc(cmd) })
		return "127.0.0.1:" + strconv.Itoa(p[0]), "127.0.0.1:" + strconv.Itoa(p[1]), nil
	}
	if cfg.Topology == "dev" {
		addr, _, err := start("dev", "agent", "-dev")
		return addr, addr, stop, err
	}
	server, serf, err := start("server", "agent", "-server", "-bootstrap-expect=1")
	if err != nil {
		return "", "", stop, err
	}
	agent, _, err = start("client", "agent", "-retry-join", serf, "-retry-interval", "1s")
	return server, agent, stop, err
}

// bulkNode is the catalog node holding the services no event touches,
// as a catalog sync (consul-k8s, ESM) registers them: written in
// transactions of txnServices services, which a loaded machine does at
// hundreds of services a second where agent registrations manage a few
// dozen. The services the events change are registered through the agent
// (their TTL checks and maintenance need it).
const (
	bulkNode    = "bench-sync"
	txnServices = 12 // 5 operations each; Consul allows 64 per transaction
)

// registerAll registers services × 3 instances: instances 0 and 1 with a
// passing check, instance 2 without checks.
func registerAll(c *api.Client, cfg ConsulEventsConfig) error {
	targets := map[int]bool{}
	for n := range cfg.PerEvent {
		targets[eventTarget(n, cfg.Services)] = true
	}
	if _, err := c.Catalog().Register(&api.CatalogRegistration{Node: bulkNode, Address: "10.255.0.1", SkipNodeUpdate: true}, nil); err != nil {
		return fmt.Errorf("registering node %s: %w", bulkNode, err)
	}
	var ops api.TxnOps
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		ok, resp, _, err := c.Txn().Txn(ops, nil)
		ops = ops[:0]
		switch {
		case err != nil:
			return fmt.Errorf("registering services: %w", err)
		case !ok:
			return fmt.Errorf("registering services: transaction failed: %v", resp.Errors)
		}
		return nil
	}
	for i := range cfg.Services {
		if targets[i] {
			for j := range consulInstances {
				if err := c.Agent().ServiceRegister(instance(i, j, basePort(j), j < 2)); err != nil {
					return fmt.Errorf("registering %s: %w", workload.Name(i), err)
				}
			}
			continue
		}
		for j := range consulInstances {
			r := instance(i, j, basePort(j), false)
			ops = append(ops, &api.TxnOp{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: bulkNode,
				Service: api.AgentService{ID: r.ID, Service: r.Name, Address: r.Address, Port: r.Port}}})
			if j < 2 {
				ops = append(ops, &api.TxnOp{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{
					Node: bulkNode, CheckID: r.ID + "-check", Name: "bench", Status: api.HealthPassing, ServiceID: r.ID}}})
			}
		}
		if (i+1)%txnServices == 0 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// eventTarget is the service the n-th round of events changes (in the
// first half; churn stays in the second).
func eventTarget(n, services int) int { return (n*7919 + 13) % max(1, services/2) }

func basePort(j int) int { return 8000 + j }

func instance(i, j, port int, checked bool) *api.AgentServiceRegistration {
	r := &api.AgentServiceRegistration{ID: fmt.Sprintf("%s-%d", workload.Name(i), j), Name: workload.Name(i),
		Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: port}
	if checked {
		r.Check = &api.AgentServiceCheck{CheckID: r.ID + "-ttl", TTL: "2h", Status: api.HealthPassing}
	}
	return r
}

// churn adds and removes a check-less extra instance on services of the
// second half (never a target of the events) at cfg.Churn per second.
func churn(ctx context.Context, c *api.Client, cfg ConsulEventsConfig, n *atomic.Int64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Churn))
	defer t.Stop()
	up := map[int]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := cfg.Services/2 + rand.N(cfg.Services-cfg.Services/2)
		id := fmt.Sprintf("%s-churn", workload.Name(i))
		var err error
		if up[i] {
			err = c.Agent().ServiceDeregister(id)
		} else {
			r := instance(i, 9, 9000, false)
			r.ID = id
			err = c.Agent().ServiceRegister(r)
		}
		if err == nil {
			up[i] = !up[i]
			n.Add(1)
		}
	}
}

// consulEvent is one kind of registry change: do makes it on service i,
// done tells a client that holds it.
type consulEvent struct {
	name string
	do   func(c *api.Client, i int) error
	done func(i int) func(*envoysim.Client) bool
}

func consulEvents() []consulEvent {
	id := func(i, j int) string { return fmt.Sprintf("%s-%d", workload.Name(i), j) }
	has := func(port int, h corev3.HealthStatus) func(i int) func(*envoysim.Client) bool {
		return func(i int) func(*envoysim.Client) bool {
			return func(c *envoysim.Client) bool { got, ok := healthAt(c, workload.Name(i), port); return ok && got == h }
		}
	}
	lacks := func(port int) func(i int) func(*envoysim.Client) bool {
		return func(i int) func(*envoysim.Client) bool {
			return func(c *envoysim.Client) bool { _, ok := healthAt(c, workload.Name(i), port); return !ok }
		}
	}
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
		{"instance added, passing", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(instance(i, 3, 8003, true)) }, has(8003, H)},
		{"instance added without checks", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(instance(i, 4, 8004, false)) }, has(8004, H)},
		{"port change by re-registration", func(c *api.Client, i int) error { return c.Agent().ServiceRegister(instance(i, 2, 8102, false)) }, has(8102, H)},
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

// runEvents makes every kind of change on PerEvent services of the first
// half, in the order of consulEvents on each service (each builds on the
// one before), timing each until every client has it.
func runEvents(ctx context.Context, c *api.Client, f *fleet, cfg ConsulEventsConfig, res *ConsulEventsResult) {
	k := 0
	for n := range cfg.PerEvent {
		i := eventTarget(n, cfg.Services)
		for _, ev := range consulEvents() {
			k++
			t := f.track(k, ev.done(i))
			if err := ev.do(c, i); err != nil {
				f.untrack(t)
				res.Missed[ev.name]++
				continue
			}
			waitTracked(ctx, t, cfg.Timeout)
			f.untrack(t)
			lat, ok := t.latencies()
			if !ok {
				res.Missed[ev.name]++
				continue
			}
			res.Events[ev.name] = append(res.Events[ev.name], slices.Max(lat))
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

// connsTo counts the established TCP connections of process pid to port
// (its sockets' inodes matched in /proc/net/tcp).
func connsTo(pid int, port string) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[l[8:len(l)-1]] = true
		}
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fs := strings.Fields(line)
		if len(fs) > 9 && strings.HasSuffix(fs[2], want) && fs[3] == "01" && inodes[fs[9]] {
			n++
		}
	}
	return n
}

// Markdown renders the result as a table, one row per event kind.
func (r *ConsulEventsResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "topology %s, %d services × %d instances, %d delta clients, churn %.0f/s, source {%s}\n\n",
		c.Topology, c.Services, consulInstances, c.Clients, c.Churn, c.SourceYAML)
	fmt.Fprintf(&b, "first sync %v, peak connections to the agent %d, HTTP 429 from the agent %.0f\n\n",
		r.FirstSync.Round(time.Millisecond), r.PeakConns, r.HTTP429)
	fmt.Fprintf(&b, "server RPCs %.0f (%.0f/min; blocking %.0f) over %.1f min with %d churn registrations and %d events\n\n",
		r.ServerRPC, r.ServerRPC/r.Minutes, r.ServerQueries, r.Minutes, r.Churned, 9*c.PerEvent)
	b.WriteString("| event | n | p50 | p99 | max | missed |\n|---|---|---|---|---|---|\n")
	for _, ev := range consulEvents() {
		l := r.Events[ev.name]
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %v | %d |\n", ev.name, len(l), pct(l, 50).Round(time.Millisecond),
			pct(l, 99).Round(time.Millisecond), pct(l, 100).Round(time.Millisecond), r.Missed[ev.name])
	}
	return b.String()
}
