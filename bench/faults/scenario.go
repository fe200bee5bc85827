package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/procstat"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// runOnce runs every fault once, on a fresh agent and bridges.
func runOnce(ctx context.Context, cfg config) ([]result, error) {
	dir, err := os.MkdirTemp("", "xdsbridge-bench-faults")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ca, err := tlstest.WriteCA(dir, "trusted")
	if err != nil {
		return nil, err
	}
	pair, err := ca.Write(dir, "agent", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	a, err := newAgent(cfg.consul, dir, []string{ca.CertFile, pair.CertFile, pair.KeyFile})
	if err != nil {
		return nil, err
	}
	if err := a.start(ctx); err != nil {
		return nil, err
	}
	defer a.stop(syscall.SIGKILL)
	s := &scenario{cfg: cfg, dir: dir, agent: a}
	if err := s.register(true, 1); err != nil {
		return nil, err
	}

	// Over plain HTTP, the default: at rest, killed, stopped.
	plain, err := s.startBridge(ctx, "plain", a.http, "")
	if err != nil {
		return nil, err
	}
	var out []result
	r := plain.measure(ctx, "at rest", func() {})
	out = append(out, r)
	for _, f := range []struct {
		name string
		sig  syscall.Signal
	}{{"agent killed (SIGKILL)", syscall.SIGKILL}, {"agent stopped (SIGINT)", syscall.SIGINT}} {
		r := plain.measure(ctx, f.name, func() { a.stop(f.sig) })
		if err := a.start(ctx); err != nil { // back, empty
			return nil, err
		}
		back, err := plain.back(ctx, true)
		if err != nil {
			return nil, err
		}
		r.BackMs = &back
		out = append(out, r)
	}
	plain.stop()

	// Over HTTPS: a certificate of another CA.
	secure, err := s.startBridge(ctx, "https", a.https, ca.CertFile)
	if err != nil {
		return nil, err
	}
	defer secure.stop()
	im, err := startImpostor(dir)
	if err != nil {
		return nil, err
	}
	defer im.Close()
	r = secure.measure(ctx, "untrusted certificate", func() {
		secure.proxy.SetUpstream(im.Addr().String())
		secure.proxy.Cut()
	})
	secure.proxy.SetUpstream(a.https)
	back, err := secure.back(ctx, false)
	if err != nil {
		return nil, err
	}
	r.BackMs = &back
	return append(out, r), nil
}

// scenario is what one run shares: the agent and the instances registered
// so far.
type scenario struct {
	cfg   config
	dir   string
	agent *agent
	extra int // instances registered beyond the first state
}

// register registers, when base is set, the first state (cfg.services
// services of 2 instances), then the extra instances of svc-00 from the
// from-th to the last.
func (s *scenario) register(base bool, from int) error {
	c := s.agent.client()
	reg := func(id, name, addr string) error {
		err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Address: addr, Port: 8080})
		if err != nil {
			return fmt.Errorf("registering %s: %w", id, err)
		}
		return nil
	}
	for i := range s.cfg.services {
		for k := 1; base && k <= 2; k++ {
			if err := reg(fmt.Sprintf("svc-%02d-%d", i, k), fmt.Sprintf("svc-%02d", i), fmt.Sprintf("10.0.%d.%d", i, k)); err != nil {
				return err
			}
		}
	}
	for k := max(from, 1); k <= s.extra; k++ {
		if err := reg(fmt.Sprintf("svc-00-x%d", k), "svc-00", fmt.Sprintf("10.9.0.%d", k)); err != nil {
			return err
		}
	}
	return nil
}

// bridge is one bridge process reading the agent through its proxy, and
// the client watching it.
type bridge struct {
	s      *scenario
	cmd    *exec.Cmd
	exited chan struct{}
	proxy  *countproxy.Proxy
	client *envoysim.Client
	admin  string
}

// startBridge starts a bridge whose Consul source reads upstream through a
// counting proxy (over HTTPS when caFile is set) and waits until its
// client holds every service.
func (s *scenario) startBridge(ctx context.Context, name, upstream, caFile string) (*bridge, error) {
	p, err := countproxy.HTTP(upstream)
	if err != nil {
		return nil, err
	}
	ports, err := freeport.Take(2)
	if err != nil {
		return nil, err
	}
	b := &bridge{s: s, proxy: p, admin: fmt.Sprintf("127.0.0.1:%d", ports[1]), exited: make(chan struct{})}
	xdsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	address, tlsKeys := p.Addr, ""
	if caFile != "" {
		address, tlsKeys = "https://"+p.Addr, fmt.Sprintf("\n    tls: {ca_file: %s}", caFile)
	}
	conf := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`xds: {listen: %s}
admin: {listen: %s}
sources:
  - name: consul
    type: consul
    address: %s
    services: {exclude: [consul]}%s
`, xdsAddr, b.admin, address, tlsKeys)), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	b.cmd = exec.Command(s.cfg.bridge, "run", "--config", conf)
	b.cmd.Stderr = logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		_ = b.cmd.Wait()
		logf.Close()
		close(b.exited)
	}()
	if err := poll(ctx, time.Minute, func() bool {
		resp, err := http.Get("http://" + b.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, b.died); err != nil {
		b.stop()
		return nil, fmt.Errorf("bridge %s not ready: %w", name, err)
	}
	if b.client, err = envoysim.Start(ctx, envoysim.Options{Addr: xdsAddr, Node: "watcher", Delta: true}); err != nil {
		b.stop()
		return nil, err
	}
	if err := poll(ctx, time.Minute, func() bool { return len(b.client.State().Clusters) == s.cfg.services }, b.died); err != nil {
		b.stop()
		return nil, fmt.Errorf("the client of bridge %s never held the services: %w", name, err)
	}
	return b, nil
}

func (b *bridge) died() error {
	select {
	case <-b.exited:
		return fmt.Errorf("the bridge exited: %v", b.cmd.ProcessState)
	default:
		return nil
	}
}

func (b *bridge) stop() {
	if b.client != nil {
		b.client.Close()
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.proxy.Close()
}

// measure makes the fault and measures the bridge and the proxy over the
// window, and over its second half.
func (b *bridge) measure(ctx context.Context, name string, fault func()) result {
	pid := b.cmd.Process.Pid
	p0, _ := procstat.Read(pid)
	c0 := b.proxy.Counts()
	start := time.Now()
	fault()
	half := b.s.cfg.window / 2
	wait(ctx, start.Add(half))
	p1, _ := procstat.Read(pid)
	c1 := b.proxy.Counts()
	mid := time.Now()
	wait(ctx, start.Add(b.s.cfg.window))
	p2, _ := procstat.Read(pid)
	c2 := b.proxy.Counts()
	end := time.Now()
	whole, second := end.Sub(start).Seconds(), end.Sub(mid).Seconds()
	r := result{Fault: name, Seconds: whole,
		CPU:        100 * p2.Sub(p0).CPU.Seconds() / whole,
		SteadyCPU:  100 * p2.Sub(p1).CPU.Seconds() / second,
		Attempts:   c2.Sub(c0).Attempts(),
		Rate:       float64(c2.Sub(c0).Attempts()) / whole,
		SteadyRate: float64(c2.Sub(c1).Attempts()) / second,
	}
	fmt.Fprintf(os.Stderr, "  %-24s CPU %6.2f %% (%6.2f), %8.2f attempts/s (%8.2f)\n", name, r.CPU, r.SteadyCPU, r.Rate, r.SteadyRate)
	return r
}

func wait(ctx context.Context, until time.Time) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// back waits until the bridge reads the agent again (its source no longer
// stale), registers the agent's state again when it came back empty, then
// one more instance, and returns the milliseconds from that registration
// to the client holding it (-1 if not within a minute).
func (b *bridge) back(ctx context.Context, empty bool) (float64, error) {
	if err := poll(ctx, 2*time.Minute, b.fresh, b.died); err != nil {
		return 0, fmt.Errorf("the bridge never read the agent again: %w", err)
	}
	// An agent back empty gets everything again, the new instance last;
	// one that kept its catalog gets the new instance.
	b.s.extra++
	from := b.s.extra
	if empty {
		from = 1
	}
	if err := b.s.register(empty, from); err != nil {
		return 0, err
	}
	registered := time.Now()
	want := fmt.Sprintf("10.9.0.%d", b.s.extra)
	err := poll(ctx, time.Minute, func() bool {
		return slices.Contains(addrs(b.client.State().Assignments["svc-00"]), want)
	}, b.died)
	if err != nil {
		fmt.Fprintf(os.Stderr, "  the client did not hold the new instance: %v\n", err)
		return -1, nil
	}
	ms := float64(time.Since(registered).Microseconds()) / 1000
	fmt.Fprintf(os.Stderr, "  %-24s %8.1f ms from the registration to the client\n", "back", ms)
	return ms, nil
}

// fresh reports whether the bridge's Consul source read the agent last
// time it tried.
func (b *bridge) fresh() bool {
	resp, err := http.Get("http://" + b.admin + "/sources")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var all []struct {
		Name  string `json:"name"`
		Stale bool   `json:"stale"`
	}
	if json.NewDecoder(resp.Body).Decode(&all) != nil {
		return false
	}
	for _, s := range all {
		if s.Name == "consul" {
			return !s.Stale
		}
	}
	return false
}

func addrs(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, g := range cla.GetEndpoints() {
		for _, lb := range g.GetLbEndpoints() {
			out = append(out, lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	return out
}

// startImpostor listens for TLS with a certificate for 127.0.0.1 from a CA
// the bridge does not trust, as an agent whose CA was rotated without the
// bridge being told.
func startImpostor(dir string) (net.Listener, error) {
	other, err := tlstest.WriteCA(dir, "other")
	if err != nil {
		return nil, err
	}
	pair, err := other.Write(dir, "impostor", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return ln, nil
}
