// Package consultest starts a real Consul agent in -dev mode (Start), or the
// topology users run, a server agent and a client agent joined to it
// (StartCluster), for integration tests: every port on a free loopback port
// (so that agents of parallel tests never collide), a unique node name, logs
// in the test's temporary directory (printed when the test fails), and
// Stop/Kill/Restart/RestartEmpty/Freeze/Thaw so that tests can take the
// agent away, hang it, and bring it back on the same ports, with its data
// directory or without.
//
// The binary is found by Binary: $XDSBRIDGE_CONSUL, else `consul` on PATH,
// else the cache that scripts/tools.sh fills. Without one the test is
// skipped, or fails when XDSBRIDGE_INTEGRATION=required.
package consultest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/testbin"
)

// Version is the Consul version the tools module builds.
const Version = "1.14.11"

// Binary returns the path of the consul binary, or skips (fails, when
// XDSBRIDGE_INTEGRATION=required) the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	return testbin.Find(t, "XDSBRIDGE_CONSUL", "consul", Version)
}

// Option changes how Start runs the agent.
type Option func(*options)

type options struct {
	datacenter string
	config     []string // extra configuration files' contents
	https      bool
	extraArgs  []string
	startLimit time.Duration
}

// WithHCL adds a configuration fragment in HCL (ACLs, TLS, limits, ...).
// Several fragments are merged by Consul in order.
func WithHCL(hcl string) Option {
	return func(o *options) { o.config = append(o.config, hcl) }
}

// WithHTTPS gives the agent an HTTPS port (Agent.HTTPSAddr); the TLS
// material itself is configured with WithHCL.
func WithHTTPS() Option { return func(o *options) { o.https = true } }

// WithDatacenter names the agent's datacenter (default dc1).
func WithDatacenter(dc string) Option { return func(o *options) { o.datacenter = dc } }

// WithArgs adds command-line arguments.
func WithArgs(args ...string) Option {
	return func(o *options) { o.extraArgs = append(o.extraArgs, args...) }
}

// Agent is a running (or stopped) Consul agent.
type Agent struct {
	// HTTPAddr is host:port of the HTTP API; HTTPSAddr that of the HTTPS API
	// when WithHTTPS was given; DNSAddr that of the DNS interface;
	// SerfLANAddr that of the LAN gossip (clients join it); SerfWANAddr
	// that of the WAN gossip (to federate two agents with JoinWAN).
	HTTPAddr, HTTPSAddr, DNSAddr, SerfLANAddr, SerfWANAddr string
	// Datacenter is the agent's datacenter (dc1 unless WithDatacenter).
	Datacenter string
	// Node is the agent's unique node name; DataDir its data directory.
	Node, DataDir string

	t       testing.TB
	bin     string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

var nodeSeq atomic.Int64

// Start runs `consul agent -dev` and returns once it has a leader. The agent
// is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Agent {
	t.Helper()
	a, o := newAgent(t, opts)
	a.args = append([]string{"agent", "-dev"}, a.args...)
	a.launch(o)
	return a
}

// newAgent prepares an agent: binary, node name, data directory, every
// port on a free loopback port, the options' configuration files. The
// caller adds the mode (-dev, -server, ...) and calls launch.
func newAgent(t testing.TB, opts []Option) (*Agent, options) {
	t.Helper()
	bin := Binary(t)
	o := options{startLimit: 30 * time.Second, datacenter: "dc1"}
	for _, f := range opts {
		f(&o)
	}
	dir := t.TempDir()
	a := &Agent{
		t:       t,
		bin:     bin,
		DataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "agent.log"),
		Node:    fmt.Sprintf("node-%d-%d", os.Getpid(), nodeSeq.Add(1)),
	}
	ports := freeport.Ports(t, 8)
	a.HTTPAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
	a.DNSAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
	a.SerfLANAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	a.SerfWANAddr = "127.0.0.1:" + strconv.Itoa(ports[3])
	a.Datacenter = o.datacenter
	https := "-1"
	if o.https {
		https = strconv.Itoa(ports[7])
		a.HTTPSAddr = "127.0.0.1:" + https
	}
	a.args = []string{
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-node", a.Node, "-data-dir", a.DataDir, "-log-level", "info", "-datacenter", o.datacenter,
		"-http-port", strconv.Itoa(ports[0]),
		"-https-port", https,
		"-dns-port", strconv.Itoa(ports[1]),
		"-serf-lan-port", strconv.Itoa(ports[2]),
		"-serf-wan-port", strconv.Itoa(ports[3]),
		"-server-port", strconv.Itoa(ports[4]),
		"-grpc-port", strconv.Itoa(ports[5]),
		"-grpc-tls-port", strconv.Itoa(ports[6]),
	}
	for i, c := range o.config {
		p := filepath.Join(dir, fmt.Sprintf("extra-%d.hcl", i))
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatalf("writing agent config: %v", err)
		}
		a.args = append(a.args, "-config-file", p)
	}
	a.args = append(a.args, o.extraArgs...)
	return a, o
}

// launch starts a prepared agent, waits for a leader, and stops it when
// the test ends.
func (a *Agent) launch(o options) {
	a.t.Helper()
	t := a.t
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			a.dumpLog()
		}
	})
	a.start(o.startLimit)
}

// Client returns an API client for the agent's HTTP port with the given
// ACL token (none when empty). Its idle connections are closed when the
// test ends, so that goroutine-leak checks stay meaningful.
func (a *Agent) Client(token ...string) *api.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	a.t.Cleanup(tr.CloseIdleConnections)
	cfg := &api.Config{Address: a.HTTPAddr, Scheme: "http", Transport: tr,
		HttpClient: &http.Client{Transport: tr}}
	if len(token) > 0 {
		cfg.Token = token[0]
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		a.t.Fatalf("consul client: %v", err)
	}
	return c
}

// Stop terminates the agent gracefully (SIGINT, then SIGKILL after 10 s) and
// waits for it to exit. Stopping a stopped agent does nothing.
func (a *Agent) Stop() { a.stop(os.Interrupt) }

// Kill terminates the agent at once, as a crash would.
func (a *Agent) Kill() { a.stop(os.Kill) }

// Restart starts a stopped agent again with the same ports, node name and
// data directory, and waits for a leader.
func (a *Agent) Restart() {
	a.t.Helper()
	a.Stop()
	a.start(30 * time.Second)
}

// RestartEmpty stops the agent and starts it again on the same ports and
// node name with an empty data directory: a new node ID, no persisted
// services, an empty catalog, as an agent whose disk was lost.
func (a *Agent) RestartEmpty() {
	a.t.Helper()
	a.Stop()
	if err := os.RemoveAll(a.DataDir); err != nil {
		a.t.Fatalf("emptying the data directory: %v", err)
	}
	a.start(30 * time.Second)
}

// Freeze stops the agent's process (SIGSTOP) without ending it: its
// sockets stay open and connections are accepted by the kernel, but
// nothing is answered, as an agent hung in a long pause. Thaw resumes it.
func (a *Agent) Freeze() { a.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen agent (SIGCONT).
func (a *Agent) Thaw() { a.signal(syscall.SIGCONT) }

// Reload asks the agent to reload its configuration files (SIGHUP), as
// `consul reload` does: TLS certificates among them.
func (a *Agent) Reload() { a.signal(syscall.SIGHUP) }

func (a *Agent) signal(sig os.Signal) {
	a.t.Helper()
	a.mu.Lock()
	cmd := a.cmd
	a.mu.Unlock()
	if cmd == nil {
		a.t.Fatalf("signal %v: agent %s is not running", sig, a.Node)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		a.t.Fatalf("signal %v to agent %s: %v", sig, a.Node, err)
	}
}

// JoinWAN federates a with other (another server agent, typically of
// another datacenter) and waits until a lists both datacenters.
func (a *Agent) JoinWAN(other *Agent) {
	a.t.Helper()
	c := a.Client()
	if err := c.Agent().Join(other.SerfWANAddr, true); err != nil {
		a.t.Fatalf("joining %s over the WAN: %v", other.SerfWANAddr, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		dcs, err := c.Catalog().Datacenters()
		if err == nil && len(dcs) >= 2 {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("datacenters after a WAN join: %v (%v)", dcs, err)
		}
		<-tick.C
	}
}

func (a *Agent) start(limit time.Duration) {
	a.t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		a.t.Fatalf("opening agent log: %v", err)
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		a.t.Fatalf("starting consul: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	a.mu.Lock()
	a.cmd, a.done = cmd, done
	a.mu.Unlock()
	if err := a.waitLeader(limit, done); err != nil {
		a.dumpLog()
		a.t.Fatalf("consul agent %s: %v", a.Node, err)
	}
}

// waitLeader polls /v1/status/leader until it names a leader.
func (a *Agent) waitLeader(limit time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if leader, err := getLeader(hc, a.HTTPAddr); err == nil && leader != "" {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before electing a leader")
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leader after %v", limit)
		}
	}
}

func getLeader(hc *http.Client, addr string) (string, error) {
	resp, err := hc.Get("http://" + addr + "/v1/status/leader")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var leader string
	if err := json.NewDecoder(resp.Body).Decode(&leader); err != nil {
		return "", err
	}
	return leader, nil
}

func (a *Agent) stop(sig os.Signal) {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	// A frozen agent handles the signal only once it runs again.
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (a *Agent) dumpLog() {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return
	}
	const limit = 16 << 10
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	a.t.Logf("consul agent %s log (tail):\n%s", a.Node, bytes.TrimSpace(b))
}
