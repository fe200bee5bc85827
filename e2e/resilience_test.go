package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// stop sends SIGTERM and waits for a graceful exit.
func (p *process) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Fatalf("bridge exited with %v after SIGTERM", p.err)
		}
	case <-time.After(15 * time.Second):
		p.t.Fatal("bridge did not stop within 15s of SIGTERM")
	}
}

// waitListening waits until addr accepts TCP connections.
func waitListening(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	bridgetest.Eventually(t, timeout, addr+" to listen", func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func register(t *testing.T, c *api.Client, id, name, addr string, port int) {
	t.Helper()
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Address: addr, Port: port}); err != nil {
		t.Fatal(err)
	}
}

// consulBridge is the configuration of a bridge on free ports whose one
// source is the Consul agent at agentAddr: write(top, source) writes it
// with extra top-level keys and extra keys of the source entry.
type consulBridge struct {
	dir, cfg, xdsAddr, adminAddr, agentAddr string
}

func newConsulBridge(t *testing.T, agentAddr string) *consulBridge {
	t.Helper()
	dir := t.TempDir()
	return &consulBridge{dir: dir, cfg: filepath.Join(dir, "bridge.yaml"), agentAddr: agentAddr,
		xdsAddr: freeport.Addr(t), adminAddr: freeport.Addr(t)}
}

func (b *consulBridge) write(t *testing.T, top, source string) {
	t.Helper()
	writeFile(t, b.cfg, fmt.Sprintf(`
xds: {listen: %s}
admin: {listen: %s}
%s
sources:
  - name: consul
    type: consul
    address: %s
    services: {exclude: [consul]}
    %s
`, b.xdsAddr, b.adminAddr, top, b.agentAddr, source))
}

// TestWarmStartDuringConsulOutage: a bridge with state_dir, restarted while
// its only source (Consul) is down, serves the last good endpoints to a
// fresh client at once; without state_dir, it stays not ready, saying why.
func TestWarmStartDuringConsulOutage(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	register(t, c, "web-1", "web", "10.0.0.1", 8080)
	register(t, c, "web-2", "web", "10.0.0.2", 8080)
	b := newConsulBridge(t, agent.HTTPAddr)
	dir, cfg, xdsAddr, adminAddr := b.dir, b.cfg, b.xdsAddr, b.adminAddr
	const startup = "startup: {timeout: 500ms}"
	b.write(t, "state_dir: state", startup)
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	web := func(s envoysim.State) bool { return len(endpoints(s.Assignments["web"])) == 2 }
	waitClient(t, startClient(t, xdsAddr, envoysim.Options{Node: "before"}), "web with 2 endpoints", web)
	p.stop()
	if _, err := os.Stat(filepath.Join(dir, "state", "state.json")); err != nil {
		t.Fatalf("no state persisted: %v", err)
	}

	agent.Stop()
	began := time.Now()
	p = start(t, cfg)
	waitListening(t, xdsAddr, patience)
	fresh := startClient(t, xdsAddr, envoysim.Options{Node: "after", Delta: true})
	waitClient(t, fresh, "web with 2 endpoints from the persisted state", web)
	took := time.Since(began)
	// The agent is down, so these endpoints can only have come from the
	// persisted state; how soon is a benchmark's figure, logged here.
	t.Logf("a fresh client had the persisted endpoints %v after the restart", took.Round(time.Millisecond))
	_, body := bridgetest.Get("http://" + adminAddr + "/sources")
	if !strings.Contains(body, `"startup": "warm"`) || !strings.Contains(body, `"stale": true`) {
		t.Errorf("/sources does not show the warm, stale source:\n%s", body)
	}
	p.stop()

	// Without state_dir the only source cannot sync: not ready, and the
	// timeout does not open the gate on an empty world.
	b.write(t, "", startup)
	start(t, cfg) // its cleanup stops it
	waitListening(t, adminAddr, patience)
	bridgetest.Eventually(t, patience, "the startup timeout", func() bool {
		_, body := bridgetest.Get("http://" + adminAddr + "/sources")
		return strings.Contains(body, `"startup": "timed_out"`)
	})
	if code, body := bridgetest.Get("http://" + adminAddr + "/readyz"); code != 503 || !strings.Contains(body, "consul") {
		t.Errorf("/readyz = %d %q, want 503 naming consul", code, body)
	}
}

// TestGuardAgentRestartedEmpty: a Consul agent restarted without its state
// and refilled over a few seconds, with default settings: no refilled
// endpoint ever goes missing at a connected client (the source marks its
// first update after the restart Reset, and the removal guard holds what
// the refill has not brought back yet), and the services that never come
// back are removed once the refill has settled.
func TestGuardAgentRestartedEmpty(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	const n, gone = 10, 2
	const refill = 3 * time.Second
	name := func(i int) string { return fmt.Sprintf("svc%02d", i) }
	for i := range n {
		register(t, c, name(i), name(i), fmt.Sprintf("10.0.1.%d", i+1), 8080)
	}
	b := newConsulBridge(t, agent.HTTPAddr)
	xdsAddr, adminAddr := b.xdsAddr, b.adminAddr
	b.write(t, "", "")
	start(t, b.cfg)
	// Every wait is the shared patience (a loaded machine fails no test);
	// what is asserted is the outcome and the guard's counter, not how
	// long anything took.
	bridgetest.WaitReady(t, adminAddr, patience)

	var (
		mu       sync.Mutex
		watching bool
		lost     []string // refilled services seen without their endpoint
	)
	check := func(cl *envoysim.Client, _ envoysim.Received) {
		mu.Lock()
		defer mu.Unlock()
		if !watching {
			return
		}
		s := cl.State()
		for i := gone; i < n; i++ {
			if len(endpoints(s.Assignments[name(i)])) != 1 {
				lost = append(lost, name(i))
			}
		}
	}
	cl := startClient(t, xdsAddr, envoysim.Options{Node: "guarded", Delta: true, OnResponse: check})
	all := func(s envoysim.State) bool {
		for i := range n {
			if len(endpoints(s.Assignments[name(i)])) != 1 {
				return false
			}
		}
		return true
	}
	waitClient(t, cl, "every service", all)
	holdsBefore := bridgetest.SourceStatus(t, adminAddr, "consul").GuardHolds
	mu.Lock()
	watching = true
	mu.Unlock()

	agent.Stop()
	if err := os.RemoveAll(agent.DataDir); err != nil {
		t.Fatal(err)
	}
	agent.Restart()
	c = agent.Client()
	// Refill all but the first `gone` services over the refill time.
	for i := gone; i < n; i++ {
		time.Sleep(refill / (n - gone)) // the pace of re-registration: the scenario itself
		register(t, c, name(i), name(i), fmt.Sprintf("10.0.1.%d", i+1), 8080)
	}
	refilled := time.Now()
	// The Consul source reports a service that is gone from the catalog
	// either as removed or as empty: both remove its endpoint.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.WaitFor(ctx, func(s envoysim.State) bool {
		return len(endpoints(s.Assignments[name(0)])) == 0 && len(endpoints(s.Assignments[name(1)])) == 0
	}); err != nil {
		t.Fatalf("deregistered services not removed: %v\n%s", err, cl.State().Summary())
	}
	t.Logf("the services gone with the restart were removed %v after the refill ended", time.Since(refilled).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("refilled services lost their endpoint while the agent refilled: %v", lost)
	}
	if st := bridgetest.SourceStatus(t, adminAddr, "consul"); st.GuardHolds <= holdsBefore {
		t.Errorf("guard_holds %d, was %d: no hold of the refill's removals", st.GuardHolds, holdsBefore)
	}
	for i := gone; i < n; i++ {
		if len(endpoints(cl.State().Assignments[name(i)])) != 1 {
			t.Errorf("%s has no endpoint after the refill", name(i))
		}
	}
}
