package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// ConsulConfig is the end-to-end scenario: services registered in a real
// Consul agent, served by the real bridge binary, changes made by
// re-registering one instance, convergence measured at the clients. It
// includes the bridge's whole pipeline: Consul blocking queries, the
// manager's holdoff, translation and the engine.
type ConsulConfig struct {
	ConsulBin, BridgeBin string
	Clients, Services    int
	Instances            int // per service
	Changes              int
	Delta                bool
	Timeout              time.Duration
	OutDir               string
	Logger               *slog.Logger
}

// RunConsul runs the end-to-end scenario. Server CPU is the bridge
// process's (from /proc); Consul's own CPU is not counted.
func RunConsul(ctx context.Context, cfg ConsulConfig) (Result, error) {
	res := Result{Config: Config{Scenario: "consul", Impl: "xdsbridge", Delta: cfg.Delta, Clients: cfg.Clients,
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
	agent, err := startProc(filepath.Join(cfg.OutDir, "consul.agent.log"), cfg.ConsulBin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1", "-data-dir", filepath.Join(dir, "data"),
		"-log-level", "warn", "-http-port", strconv.Itoa(ports[0]), "-https-port", "-1", "-dns-port", "-1",
		"-serf-lan-port", strconv.Itoa(ports[1]), "-serf-wan-port", strconv.Itoa(ports[2]),
		"-server-port", strconv.Itoa(ports[3]), "-grpc-port", "-1", "-grpc-tls-port", "-1")
	if err != nil {
		return res, err
	}
	defer stopProc(agent)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	capi, err := api.NewClient(&api.Config{Address: consulAddr, Transport: tr, HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		return res, fmt.Errorf("consul client: %w", err)
	}
	if err := poll(ctx, 30*time.Second, func() bool { l, err := capi.Status().Leader(); return err == nil && l != "" }); err != nil {
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
	bridge, err := startProc(filepath.Join(cfg.OutDir, "consul.bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return res, err
	}
	defer stopProc(bridge)
	if err := poll(ctx, 30*time.Second, bridgeReady(adminAddr)); err != nil {
		return res, fmt.Errorf("waiting for the bridge to be ready: %w", err)
	}
	http.DefaultClient.CloseIdleConnections()
	cpu0 := procCPU(bridge.Process.Pid)

	start := time.Now()
	f, err := startFleet(ctx, fleetOptions{addr: xdsAddr, spec: spec, clients: cfg.Clients, delta: cfg.Delta, prefix: "envoy", full: true})
	if err != nil {
		return res, err
	}
	defer f.close()
	served, err := f.waitServed(ctx, coldFactor*cfg.Timeout)
	if err != nil {
		res.fail("cold start: %v", err)
		return res, nil
	}
	res.ColdStart = served.Sub(start)
	cpu1 := procCPU(bridge.Process.Pid)
	res.ColdCPU = cpu1 - cpu0

	c0 := f.stats()
	var all []*tracked
	for k := 1; k <= cfg.Changes; k++ {
		i := spec.Target(k)
		t := f.track(k, workload.Name(i), hasPort(workload.Name(i), changedPort(k)))
		all = append(all, t)
		if err := register(capi, spec, i, 0, k); err != nil {
			return res, err
		}
		last[i] = k
		waitTracked(ctx, t, cfg.Timeout)
		f.untrack(t)
	}
	cpu2 := procCPU(bridge.Process.Pid)
	c1 := f.stats()
	var perChange, perClient []time.Duration
	for _, t := range all {
		lat, ok := t.latencies()
		perClient = append(perClient, lat...)
		if !ok {
			res.fail("change %d did not reach every client within %s", t.k, cfg.Timeout)
			continue
		}
		perChange = append(perChange, slices.Max(lat))
	}
	if n := len(all); n > 0 {
		cc := float64(cfg.Clients * n)
		res.ChangesDone = n
		res.ConvP50, res.ConvP99, res.ConvMax = pct(perChange, 50), pct(perChange, 99), pct(perChange, 100)
		res.ClientP50, res.ClientP99 = pct(perClient, 50), pct(perClient, 99)
		res.CPUPerChange = (cpu2 - cpu1) / time.Duration(n)
		res.CPUPerClientChange = time.Duration(float64(cpu2-cpu1) / cc)
		res.BytesPerClientChange = float64(c1.Bytes-c0.Bytes) / cc
		res.ResPerClientChange = float64(c1.Resources-c0.Resources) / cc
	}
	if err := validatePorts(f, spec, last); err != nil {
		res.fail("validation: %v", err)
	}
	return res, nil
}

// bridgeReady reports whether the bridge's admin API at adminAddr says
// ready.
func bridgeReady(adminAddr string) func() bool {
	return adminAnswers(adminAddr, "/readyz", func(code int) bool { return code == http.StatusOK })
}

// adminAnswers reports whether a GET of path on the bridge's admin API
// answers with a status that ok accepts.
func adminAnswers(adminAddr, path string, ok func(status int) bool) func() bool {
	return func() bool {
		resp, err := http.Get("http://" + adminAddr + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return ok(resp.StatusCode)
	}
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

// ports of a held assignment (nil when not held).
func ports(c *envoysim.Client, name string) []int {
	cla, _ := c.Resource(envoysim.EndpointType, name).(*endpointv3.ClusterLoadAssignment)
	if cla == nil {
		return nil
	}
	var out []int
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out = append(out, int(e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()))
		}
	}
	slices.Sort(out)
	return out
}

func hasPort(name string, port int) func(*envoysim.Client) bool {
	return func(c *envoysim.Client) bool { return slices.Contains(ports(c, name), port) }
}

// validatePorts checks every client holds every service with exactly the
// ports registered.
func validatePorts(f *fleet, spec workload.Spec, last []int) error {
	bad := 0
	var first error
	for ci, c := range f.clients {
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
			if got := ports(c, workload.Name(i)); !slices.Equal(got, want) {
				bad++
				if first == nil {
					first = fmt.Errorf("client %d: %s has ports %v, want %v", ci, workload.Name(i), got, want)
				}
				break
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d clients hold a wrong state; first: %w", bad, len(f.clients), first)
	}
	return nil
}

// startProc starts bin with its output in logPath. The child has its own
// process group, so that a ctrl-C at the terminal reaches the harness
// alone, which then stops its children in order (stopProc); on Linux the
// kernel kills the child if the harness dies without doing so.
func startProc(logPath, bin string, args ...string) (*exec.Cmd, error) {
	return startLogged(os.Create, logPath, bin, args...)
}

// startProcAppend is startProc appending to the log (a process started
// again).
func startProcAppend(logPath, bin string, args ...string) (*exec.Cmd, error) {
	return startLogged(func(p string) (*os.File, error) {
		return os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}, logPath, bin, args...)
}

func startLogged(open func(string) (*os.File, error), logPath, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := open(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.TieInOwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return cmd, nil
}

// stopProc ends a child: SIGTERM, then SIGKILL after 10 s.
func stopProc(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// poll checks cond every 50 ms until it holds or the limit passes.
func poll(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return errTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// procCPU reads utime+stime of a process from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fs := strings.Fields(s[i+1:])
	if len(fs) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(fs[11], 10, 64)
	st, err2 := strconv.ParseInt(fs[12], 10, 64)
	if errors.Join(err1, err2) != nil {
		return 0
	}
	const clockTick = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTick
}
