package consul

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/fanout"
	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// Config is the end-to-end scenario: services registered in a real
// Consul agent, served by the real bridge binary, changes made by
// re-registering one instance, convergence measured at the clients. It
// includes the bridge's whole pipeline: Consul blocking queries, the
// manager's holdoff, translation and the engine.
type Config struct {
	ConsulBin, BridgeBin string
	Clients, Services    int
	Instances            int // per service
	Changes              int
	Delta                bool
	Timeout              time.Duration
	OutDir               string
	Logger               *slog.Logger
}

// Run runs the end-to-end scenario. Server CPU is the bridge
// process's (from /proc); Consul's own CPU is not counted.
func Run(ctx context.Context, cfg Config) (fanout.Result, error) {
	res := fanout.Result{Config: fanout.Config{Scenario: "consul", Impl: "xdsbridge", Delta: cfg.Delta, Clients: cfg.Clients,
		Services: cfg.Services, Endpoints: cfg.Instances, Changes: cfg.Changes, Timeout: cfg.Timeout}}
	ports, err := freeport.Take(8)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "xdsload-consul-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	consulAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	agent, err := proc.Start(filepath.Join(cfg.OutDir, "consul.agent.log"), cfg.ConsulBin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1", "-data-dir", filepath.Join(dir, "data"),
		"-log-level", "warn", "-http-port", strconv.Itoa(ports[0]), "-https-port", "-1", "-dns-port", "-1",
		"-serf-lan-port", strconv.Itoa(ports[1]), "-serf-wan-port", strconv.Itoa(ports[2]),
		"-server-port", strconv.Itoa(ports[3]), "-grpc-port", "-1", "-grpc-tls-port", "-1")
	if err != nil {
		return res, err
	}
	defer proc.Stop(agent)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	capi, err := api.NewClient(&api.Config{Address: consulAddr, Transport: tr, HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		return res, fmt.Errorf("consul client: %w", err)
	}
	if err := proc.Poll(ctx, 30*time.Second, func() bool { l, err := capi.Status().Leader(); return err == nil && l != "" }); err != nil {
		return res, fmt.Errorf("waiting for a Consul leader: %w", err)
	}
	spec := workload.Spec{Services: cfg.Services, Endpoints: cfg.Instances}
	last := make([]int, cfg.Services)
	for i := range cfg.Services {
		for j := range cfg.Instances {
			if err := register(capi, spec, i, j, 0); err != nil {
				return res, err
			}
		}
	}

	xdsAddr, adminAddr := "127.0.0.1:"+strconv.Itoa(ports[4]), "127.0.0.1:"+strconv.Itoa(ports[5])
	conf := filepath.Join(dir, "bridge.yaml")
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nlog: {level: warn}\nsources:\n  - {name: consul, type: consul, address: %q, services: {include: [\"svc-*\"]}}\n", xdsAddr, adminAddr, consulAddr)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return res, err
	}
	bridge, err := proc.Start(filepath.Join(cfg.OutDir, "consul.bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return res, err
	}
	defer proc.Stop(bridge)
	if err := proc.Poll(ctx, 30*time.Second, proc.BridgeReady(adminAddr)); err != nil {
		return res, fmt.Errorf("waiting for the bridge to be ready: %w", err)
	}
	http.DefaultClient.CloseIdleConnections()
	cpu0 := proc.CPU(bridge.Process.Pid)

	start := time.Now()
	f, err := fleet.StartLoad(ctx, fleet.LoadOptions{Addr: xdsAddr, Spec: spec, Clients: cfg.Clients, Delta: cfg.Delta, Prefix: "envoy", Full: true})
	if err != nil {
		return res, err
	}
	defer f.Close()
	served, err := f.WaitServed(ctx, fanout.ColdFactor*cfg.Timeout)
	if err != nil {
		res.Fail("cold start: %v", err)
		return res, nil
	}
	res.ColdStart = served.Sub(start)
	cpu1 := proc.CPU(bridge.Process.Pid)
	res.ColdCPU = cpu1 - cpu0

	c0 := f.Stats()
	var all []*fleet.Change
	for k := 1; k <= cfg.Changes; k++ {
		i := spec.Target(k)
		t := f.Track(k, workload.Name(i), hasPort(workload.Name(i), changedPort(k)))
		all = append(all, t)
		if err := register(capi, spec, i, 0, k); err != nil {
			return res, err
		}
		last[i] = k
		t.Wait(ctx, cfg.Timeout)
		f.Untrack(t)
	}
	cpu2 := proc.CPU(bridge.Process.Pid)
	c1 := f.Stats()
	var perChange, perClient []time.Duration
	for _, t := range all {
		lat, ok := t.Latencies()
		perClient = append(perClient, lat...)
		if !ok {
			res.Fail("change %d did not reach every client within %s", t.K, cfg.Timeout)
			continue
		}
		perChange = append(perChange, slices.Max(lat))
	}
	if n := len(all); n > 0 {
		cc := float64(cfg.Clients * n)
		res.ChangesDone = n
		res.ConvP50, res.ConvP99, res.ConvMax = report.Pct(perChange, 50), report.Pct(perChange, 99), report.Pct(perChange, 100)
		res.ClientP50, res.ClientP99 = report.Pct(perClient, 50), report.Pct(perClient, 99)
		res.CPUPerChange = (cpu2 - cpu1) / time.Duration(n)
		res.CPUPerClientChange = time.Duration(float64(cpu2-cpu1) / cc)
		res.BytesPerClientChange = float64(c1.Bytes-c0.Bytes) / cc
		res.ResPerClientChange = float64(c1.Resources-c0.Resources) / cc
	}
	if err := validatePorts(f, spec, last); err != nil {
		res.Fail("validation: %v", err)
	}
	return res, nil
}

// register (re-)registers instance j of service i; after change k > 0 the
// instance listens on changedPort(k).
func register(c *api.Client, spec workload.Spec, i, j, k int) error {
	ep := spec.Service(i, 0).Endpoints[j]
	port := int(ep.Port)
	if k > 0 {
		port = changedPort(k)
	}
	err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: fmt.Sprintf("%s-%d", workload.Name(i), j), Name: workload.Name(i), Address: ep.Address, Port: port,
	})
	if err != nil {
		return fmt.Errorf("registering %s instance %d: %w", workload.Name(i), j, err)
	}
	return nil
}

func changedPort(k int) int { return 20000 + k%40000 }

func hasPort(name string, port int) func(*envoysim.Client) bool {
	return func(c *envoysim.Client) bool { return slices.Contains(fleet.Ports(c, name), port) }
}

// validatePorts checks every client holds every service with exactly the
// ports registered.
func validatePorts(f *fleet.Load, spec workload.Spec, last []int) error {
	bad := 0
	var first error
	for ci, c := range f.Clients {
		for i := range spec.Services {
			var want []int
			for j, ep := range spec.Service(i, 0).Endpoints {
				if j == 0 && last[i] > 0 {
					want = append(want, changedPort(last[i]))
				} else {
					want = append(want, int(ep.Port))
				}
			}
			slices.Sort(want)
			if got := fleet.Ports(c, workload.Name(i)); !slices.Equal(got, want) {
				bad++
				if first == nil {
					first = fmt.Errorf("client %d: %s has ports %v, want %v", ci, workload.Name(i), got, want)
				}
				break
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d clients hold a wrong state; first: %w", bad, len(f.Clients), first)
	}
	return nil
}
