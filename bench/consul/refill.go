package consul

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// RefillConfig is the scenario of a Consul agent restarted on an
// empty data directory: services × instances registered through a -dev
// agent, the bridge with default settings and delta clients on it; then
// the agent is stopped, its data directory removed, and it is started
// again, and all but Gone services are registered again over Refill. What
// counts is at the clients: the endpoints of refilled services they were
// ever without, and when the services that never came back were removed.
type RefillConfig struct {
	ConsulBin, BridgeBin string
	Services, Instances  int
	Gone                 int // services not registered again
	Refill               time.Duration
	Clients              int
	// SourceYAML holds extra keys of the consul source, flow style.
	SourceYAML string
	// Timeout bounds the wait for the gone services' removal after the
	// refill.
	Timeout time.Duration
	OutDir  string
	Logger  *slog.Logger
}

// RefillResult holds what the scenario measured.
type RefillResult struct {
	Config RefillConfig
	// Missing counts the endpoints of refilled services that some client
	// was without, at some response, from the restart until the end;
	// MissingResponses the responses that showed one, of Responses
	// checked.
	Missing                     int
	MissingResponses, Responses int64
	// Restart is from the agent's stop until it had a leader again;
	// Refilled when the last registration of the refill was made.
	Restart, Refilled time.Duration
	// GoneRemoved is from the end of the refill until every client held
	// the gone services without endpoints; 0 with GoneMissed when not
	// within Timeout.
	GoneRemoved time.Duration
	GoneMissed  bool
	// NodeIDs are the agent's node ID before and after the restart.
	NodeIDs [2]string
	// GuardHolds counts the holds of the source's removal guard over the
	// run (/sources); ResetLogs the bridge's log lines saying that the
	// source noticed Consul lost its state.
	GuardHolds uint64
	ResetLogs  int
}

// RunRefill runs the scenario. Every process it starts is stopped
// before it returns.
func RunRefill(ctx context.Context, cfg RefillConfig) (*RefillResult, error) {
	res := &RefillResult{Config: cfg}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "xdsload-consul-refill-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	confArgs, err := writeAgentConf(dir, []string{baseAgentConf})
	if err != nil {
		return nil, err
	}
	agent, err := newBenchAgent(cfg.ConsulBin, filepath.Join(cfg.OutDir, "consul-refill.agent.log"), filepath.Join(dir, "data"),
		"refill", false, []string{"agent", "-dev"}, confArgs)
	if err != nil {
		return nil, err
	}
	defer agent.stop()
	tr := HarnessTransport()
	defer tr.CloseIdleConnections()
	capi, err := HarnessClient(agent.http, tr)
	if err != nil {
		return nil, err
	}
	up := func() error {
		if err := agent.start(); err != nil {
			return err
		}
		return proc.Poll(ctx, 60*time.Second, func() bool { l, err := capi.Status().Leader(); return err == nil && l != "" })
	}
	if err := up(); err != nil {
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	register := func(i, j int) error {
		return capi.Agent().ServiceRegisterOpts(Instance(i, j, basePort(j), false), api.ServiceRegisterOpts{}.WithContext(ctx))
	}
	for i := range cfg.Services {
		for j := range cfg.Instances {
			if err := register(i, j); err != nil {
				return nil, fmt.Errorf("registering %s: %w", workload.Name(i), err)
			}
		}
	}
	if res.NodeIDs[0], err = nodeID(capi); err != nil {
		return nil, err
	}

	bridge, adminAddr, xdsAddr, err := startRefillBridge(cfg, agent.http)
	if err != nil {
		return nil, err
	}
	defer proc.Stop(bridge)
	synced := func() bool {
		v, err := proc.ScrapeSample("http://"+adminAddr+"/metrics", `xdsbridge_source_synced{source="consul"}`)
		return err == nil && v == 1
	}
	if err := proc.Poll(ctx, 2*time.Minute, func() bool { return proc.BridgeReady(adminAddr)() && synced() }); err != nil {
		return nil, fmt.Errorf("waiting for the bridge: %w", err)
	}
	chk := &refillCheck{cfg: cfg, missing: map[[2]int]bool{}}
	var clients []*envoysim.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for n := range cfg.Clients {
		c, err := envoysim.Start(ctx, envoysim.Options{Addr: xdsAddr, Node: "refill-" + strconv.Itoa(n), Delta: true, OnResponse: chk.onResponse})
		if err != nil {
			return nil, fmt.Errorf("starting client %d: %w", n, err)
		}
		clients = append(clients, c)
	}
	if err := proc.Poll(ctx, 2*time.Minute, func() bool { return allClients(clients, chk.served) }); err != nil {
		return nil, fmt.Errorf("waiting for the clients to hold every endpoint: %w", err)
	}
	log.Info("served; restarting the agent on an empty data directory", "services", cfg.Services, "clients", cfg.Clients)

	chk.arm()
	stopped := time.Now()
	agent.stop()
	if err := os.RemoveAll(agent.dataDir); err != nil {
		return nil, err
	}
	if err := up(); err != nil {
		return nil, fmt.Errorf("restarting the agent: %w", err)
	}
	res.Restart = time.Since(stopped)
	if res.NodeIDs[1], err = nodeID(capi); err != nil {
		return nil, err
	}
	total := (cfg.Services - cfg.Gone) * cfg.Instances
	every := cfg.Refill / time.Duration(max(1, total))
	log.Info("agent back; refilling", "registrations", total, "over", cfg.Refill)
	tick := time.NewTicker(every)
	for i := cfg.Gone; i < cfg.Services; i++ {
		for j := range cfg.Instances {
			select {
			case <-ctx.Done():
				tick.Stop()
				return nil, ctx.Err()
			case <-tick.C:
			}
			if err := register(i, j); err != nil {
				tick.Stop()
				return nil, fmt.Errorf("registering %s again: %w", workload.Name(i), err)
			}
		}
	}
	tick.Stop()
	refilled := time.Now()
	res.Refilled = refilled.Sub(stopped)
	log.Info("refilled; waiting for the gone services' removal", "took", res.Refilled.Round(time.Millisecond))
	if err := proc.Poll(ctx, cfg.Timeout, func() bool { return allClients(clients, chk.goneRemoved) }); err != nil {
		res.GoneMissed = true
	} else {
		res.GoneRemoved = time.Since(refilled)
	}
	// Closed first, so that every response they received has been
	// checked.
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	chk.mu.Lock()
	res.Missing, res.MissingResponses, res.Responses = len(chk.missing), chk.missingResponses, chk.responses
	chk.mu.Unlock()
	if v, err := proc.ScrapeSample("http://"+adminAddr+"/metrics", `xdsbridge_source_guard_holds_total{source="consul"}`); err == nil {
		res.GuardHolds = uint64(v)
	}
	res.ResetLogs = countLines(filepath.Join(cfg.OutDir, "consul-refill.bridge.log"), "consul lost its state")
	return res, nil
}

// startRefillBridge writes the bridge's configuration (defaults, the
// consul source on addr) and starts it; it returns the process and its
// admin and xDS addresses.
func startRefillBridge(cfg RefillConfig, addr string) (cmd *exec.Cmd, adminAddr, xdsAddr string, err error) {
	ports, err := freeport.Take(2)
	if err != nil {
		return nil, "", "", err
	}
	xdsAddr, adminAddr = "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	extra := ""
	if cfg.SourceYAML != "" {
		extra = ", " + cfg.SourceYAML
	}
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nsources:\n"+
		"  - {name: consul, type: consul, address: %q, services: {include: [\"svc-*\"]}%s}\n", xdsAddr, adminAddr, addr, extra)
	conf := filepath.Join(cfg.OutDir, "consul-refill.bridge.yaml")
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return nil, "", "", err
	}
	cmd, err = proc.Start(filepath.Join(cfg.OutDir, "consul-refill.bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	return cmd, adminAddr, xdsAddr, err
}

// nodeID asks the agent for its node ID.
func nodeID(c *api.Client) (string, error) {
	self, err := c.Agent().Self()
	if err != nil {
		return "", fmt.Errorf("reading /v1/agent/self: %w", err)
	}
	id, _ := self["Config"]["NodeID"].(string)
	return id, nil
}

// allClients reports whether cond holds for every client.
func allClients(clients []*envoysim.Client, cond func(*envoysim.Client) bool) bool {
	for _, c := range clients {
		if !cond(c) {
			return false
		}
	}
	return true
}

// refillCheck looks at every response of every client once armed: an
// endpoint of a refilled service missing is recorded.
type refillCheck struct {
	cfg RefillConfig

	mu                          sync.Mutex
	armed                       bool
	missing                     map[[2]int]bool // service, instance
	responses, missingResponses int64
}

func (k *refillCheck) arm() {
	k.mu.Lock()
	k.armed = true
	k.mu.Unlock()
}

func (k *refillCheck) onResponse(c *envoysim.Client, _ envoysim.Received) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.armed {
		return
	}
	k.responses++
	saw := false
	for i := k.cfg.Gone; i < k.cfg.Services; i++ {
		have := fleet.Ports(c, workload.Name(i))
		for j := range k.cfg.Instances {
			if !slices.Contains(have, basePort(j)) {
				k.missing[[2]int{i, j}] = true
				saw = true
			}
		}
	}
	if saw {
		k.missingResponses++
	}
}

// served reports whether c holds every endpoint of every service.
func (k *refillCheck) served(c *envoysim.Client) bool {
	for i := range k.cfg.Services {
		if len(fleet.Ports(c, workload.Name(i))) != k.cfg.Instances {
			return false
		}
	}
	return true
}

// goneRemoved reports whether c holds the gone services without endpoints
// (removed, or empty).
func (k *refillCheck) goneRemoved(c *envoysim.Client) bool {
	for i := range k.cfg.Gone {
		if len(fleet.Ports(c, workload.Name(i))) != 0 {
			return false
		}
	}
	return true
}

// Markdown renders the result.
func (r *RefillResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "a -dev agent with %d services × %d instances, %d delta clients, the bridge with default settings (source {%s}); "+
		"the agent restarted on an empty data directory, %d services registered again over %v, %d not\n\n",
		c.Services, c.Instances, c.Clients, c.SourceYAML, c.Services-c.Gone, c.Refill, c.Gone)
	fmt.Fprintf(&b, "- agent node ID %s before, %s after the restart\n", r.NodeIDs[0], r.NodeIDs[1])
	fmt.Fprintf(&b, "- agent stop to leader again: %v; stop to the last registration of the refill: %v\n",
		r.Restart.Round(time.Millisecond), r.Refilled.Round(time.Millisecond))
	fmt.Fprintf(&b, "- **endpoints of refilled services ever missing at a client: %d** (of %d; %d of %d responses after the restart showed one)\n",
		r.Missing, (c.Services-c.Gone)*c.Instances, r.MissingResponses, r.Responses)
	if r.GoneMissed {
		fmt.Fprintf(&b, "- **the %d services that did not come back were not removed at every client within %v of the refill's end**\n", c.Gone, c.Timeout)
	} else {
		fmt.Fprintf(&b, "- **the %d services that did not come back were removed at every client %v after the refill's end**\n", c.Gone, r.GoneRemoved.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "- removal guard holds over the run: %d; bridge log lines saying the source noticed the reset: %d\n", r.GuardHolds, r.ResetLogs)
	return b.String()
}
