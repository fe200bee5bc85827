package istiod

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/consul"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/translate/istio"
)

// ConsulConfig is the Istio scenario end to end: services × 3
// instances in a real Consul agent, the bridge binary reading it with
// istio enabled in Shape, one istiod-like client (test/istiodsim,
// decoding every resource as istiod does), and one instance of the first
// service registered and deregistered in turn, Changes times, Interval
// apart, each timed from the agent's request until the client has a
// response with the instance in (or out of) the collection that carries
// the endpoints.
type ConsulConfig struct {
	ConsulBin, BridgeBin string
	Topology             string // "cluster" (server + client agent) or "dev"
	// TLS gives the agents an HTTPS port and points the bridge at it, as
	// docs/consul.md recommends; the bridge's Consul settings are
	// otherwise its defaults.
	TLS      bool
	Shape    string // inline or workload_entries
	Services int
	Changes  int
	Interval time.Duration
	Timeout  time.Duration // bound of the first sync and of one change
	OutDir   string
	Logger   *slog.Logger
}

// ConsulResult is what the scenario measured.
type ConsulResult struct {
	Config ConsulConfig
	// HTTPSProto is the protocol the agent's HTTPS API answered a Go
	// client with, with TLS.
	HTTPSProto string
	// FirstSync is from the bridge's start until the client has every
	// service.
	FirstSync time.Duration
	// Registered and Deregistered are the latencies of each kind of
	// change; Missed counts changes that did not arrive within Timeout.
	Registered, Deregistered []time.Duration
	Missed                   int
	LoadBefore, LoadAfter    string
}

// toggledAddress is the address of the instance the scenario registers and
// deregisters, which no other instance has, so that its presence in a
// collection is its address's.
const toggledAddress = "10.254.0.1"

// RunConsul runs the scenario. Every process it starts is stopped
// before it returns.
func RunConsul(ctx context.Context, cfg ConsulConfig) (*ConsulResult, error) {
	res := &ConsulResult{Config: cfg, LoadBefore: proc.LoadLine()}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "xdsload-istiod-consul-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	agents := consul.EventsConfig{ConsulBin: cfg.ConsulBin, Topology: cfg.Topology, TLS: cfg.TLS, Services: cfg.Services, OutDir: cfg.OutDir}
	top, capi, stop, err := consul.StartLed(ctx, agents, dir)
	defer stop()
	if err != nil {
		return nil, err
	}
	if err := consul.RegisterAll(ctx, capi, agents); err != nil {
		return nil, err
	}
	address, tlsYAML, xdsAddr, adminAddr, httpsProto, err := top.BridgeSide(cfg.TLS)
	if err != nil {
		return nil, err
	}
	res.HTTPSProto = httpsProto
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nlog: {level: warn}\nsources:\n"+
		"  - {name: consul, type: consul, address: %q%s, services: {include: [\"svc-*\"]}}\nistio: {enabled: true, shape: %s}\n",
		xdsAddr, adminAddr, address, tlsYAML, cfg.Shape)
	conf := filepath.Join(cfg.OutDir, "istiod-consul.bridge.yaml")
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	start := time.Now()
	bridge, err := proc.Start(filepath.Join(cfg.OutDir, "istiod-consul.bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return nil, err
	}
	defer proc.Stop(bridge)
	if err := proc.Poll(ctx, cfg.Timeout, proc.BridgeSynced(adminAddr, "consul")); err != nil {
		return nil, fmt.Errorf("waiting for the bridge to be ready and the source synced: %w", err)
	}
	client, err := istiodsim.Connect(xdsAddr, istiodsim.Options{})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	entries := istio.ServiceEntry.TypeURLs()[0]
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = client.WaitFor(wctx, func() bool { return client.Synced() && len(client.Collection(entries)) == cfg.Services })
	cancel()
	if err != nil {
		return nil, fmt.Errorf("waiting for %d ServiceEntries: %w", cfg.Services, err)
	}
	res.FirstSync = time.Since(start)
	log.Info("istiod synced", "services", cfg.Services, "took", res.FirstSync.Round(time.Millisecond))

	carrier := entries
	if cfg.Shape == string(istio.ShapeWorkloadEntries) {
		carrier = istio.WorkloadEntry.TypeURLs()[0]
	}
	reg := consul.Instance(0, 9, 8009, true)
	reg.ID, reg.Address = reg.Name+"-toggled", toggledAddress
	for k := range cfg.Changes {
		if k > 0 {
			if err := sleepUntil(ctx, time.Now().Add(cfg.Interval)); err != nil {
				return nil, err
			}
		}
		up := k%2 == 0
		n := len(client.Responses())
		t0 := time.Now()
		if up {
			err = capi.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx))
		} else {
			err = capi.Agent().ServiceDeregisterOpts(reg.ID, (&api.QueryOptions{}).WithContext(ctx))
		}
		if err != nil {
			return nil, fmt.Errorf("change %d: %w", k, err)
		}
		// arrived returns the first response since the change whose
		// collection shows it.
		arrived := func() (istiodsim.Response, bool) {
			for _, r := range client.Responses()[n:] {
				if r.TypeURL == carrier && !r.NACKed && istiodsim.HasAddress(r.Resources, toggledAddress) == up {
					return r, true
				}
			}
			return istiodsim.Response{}, false
		}
		wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		err = client.WaitFor(wctx, func() bool { _, ok := arrived(); return ok })
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			log.Warn("change not received", "change", k, "registered", up, "err", err)
			res.Missed++
			continue
		}
		r, _ := arrived()
		if up {
			res.Registered = append(res.Registered, r.Received.Sub(t0))
		} else {
			res.Deregistered = append(res.Deregistered, r.Received.Sub(t0))
		}
	}
	res.LoadAfter = proc.LoadLine()
	return res, nil
}

// Markdown renders the result.
func (r *ConsulResult) Markdown() string {
	c := r.Config
	var b strings.Builder
	how := "plain HTTP"
	if c.TLS {
		how = "HTTPS (" + r.HTTPSProto + ")"
	}
	fmt.Fprintf(&b, "Consul %s topology over %s, bridge defaults otherwise; shape %s; %d services × 3 instances; "+
		"%d changes %s apart; first sync %s; missed %d; load average %s -> %s\n\n",
		c.Topology, how, c.Shape, c.Services, c.Changes, c.Interval, r.FirstSync.Round(time.Millisecond), r.Missed, r.LoadBefore, r.LoadAfter)
	what := "ServiceEntry"
	if c.Shape == string(istio.ShapeWorkloadEntries) {
		what = "WorkloadEntry"
	}
	fmt.Fprintf(&b, "| change to %s collection received | changes | p50 | p99 | max |\n|---|--:|--:|--:|--:|\n", what)
	row := func(name string, ds []time.Duration) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", name, len(ds), report.MS(report.Pct(ds, 50)), report.MS(report.Pct(ds, 99)), report.MS(report.Pct(ds, 100)))
	}
	row("instance registered", r.Registered)
	row("instance deregistered", r.Deregistered)
	row("all", append(append([]time.Duration(nil), r.Registered...), r.Deregistered...))
	return b.String()
}
