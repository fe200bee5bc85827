package consul

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// Topology is what StartTopology started.
type Topology struct {
	// Server is the HTTP address of the agent whose telemetry counts the
	// reads that reach the servers; agent that of the agent the bridge
	// and the harness talk to (the same agent in the dev topology).
	Server, Agent string
	// AgentHTTPS is the agent's HTTPS address with TLS, else empty; caFile
	// the CA that signed its certificate.
	AgentHTTPS, CAFile string
	// serverPID and agentPID are the processes of server and agent (the
	// same in the dev topology), for their CPU time.
	serverPID, agentPID int
	// Join starts one more client agent, named name, joined to the
	// server (cluster topology only), and returns its HTTP and HTTPS
	// ("" without TLS) addresses.
	Join func(name string) (http, https string, err error)
	Stop func()
}

// StartTopology starts the agents of cfg.Topology, each with
// telemetry, cfg.AgentHCL and, with cfg.TLS, an HTTPS port whose
// certificate (for 127.0.0.1) is signed by a CA made for this run. The
// agents do not ask for client certificates (verify_incoming false), as
// most agents reached over loopback do not. The agents are not
// consultest's: those belong to a test (testing.TB) and this runs in a
// program; the arguments are the same.
func StartTopology(cfg EventsConfig, dir string) (*Topology, error) {
	top := &Topology{}
	var procs []func()
	top.Stop = func() {
		for _, proc := range slices.Backward(procs) {
			proc()
		}
	}
	confs := []string{baseAgentConf}
	if cfg.AgentHCL != "" {
		confs = append(confs, cfg.AgentHCL)
	}
	if cfg.TLS {
		ca, err := tlstest.WriteCA(dir, "consul")
		if err != nil {
			return top, err
		}
		pair, err := ca.Write(dir, "agent", "127.0.0.1", "localhost")
		if err != nil {
			return top, err
		}
		top.CAFile = ca.CertFile
		confs = append(confs, fmt.Sprintf("tls { defaults { ca_file = %q, cert_file = %q, key_file = %q, verify_incoming = false } }\n",
			ca.CertFile, pair.CertFile, pair.KeyFile))
	}
	confArgs, err := writeAgentConf(dir, confs)
	if err != nil {
		return top, err
	}
	start := func(name string, mode ...string) (*benchAgent, error) {
		a, err := newBenchAgent(cfg.ConsulBin, filepath.Join(cfg.OutDir, "consul-events."+name+".log"), filepath.Join(dir, name), name, cfg.TLS, mode, confArgs)
		if err != nil {
			return nil, err
		}
		procs = append(procs, a.stop)
		return a, a.start()
	}
	if cfg.Topology == "dev" {
		a, err := start("dev", "agent", "-dev")
		if err != nil {
			return top, err
		}
		top.Server, top.Agent, top.AgentHTTPS = a.http, a.http, a.https
		top.serverPID, top.agentPID = a.pid(), a.pid()
		return top, nil
	}
	server, err := start("server", "agent", "-server", "-bootstrap-expect=1")
	if err != nil {
		return top, err
	}
	top.Server, top.serverPID = server.http, server.pid()
	joinAgent := func(name string) (*benchAgent, error) {
		return start(name, "agent", "-retry-join", server.serf, "-retry-interval", "1s")
	}
	top.Join = func(name string) (string, string, error) {
		a, err := joinAgent(name)
		if err != nil {
			return "", "", err
		}
		return a.http, a.https, nil
	}
	client, err := joinAgent("client")
	if err != nil {
		return top, err
	}
	top.Agent, top.AgentHTTPS, top.agentPID = client.http, client.https, client.pid()
	return top, nil
}

// BridgeSide is what a benchmark's bridge needs of the topology: where it
// reads the agent (bridgeAddress), two free loopback addresses for its xDS
// and admin listeners, and, over TLS, the protocol the agent's HTTPS API
// answers (httpsProtocol).
func (top *Topology) BridgeSide(tls bool) (address, tlsYAML, xdsAddr, adminAddr, httpsProto string, err error) {
	address, tlsYAML = top.bridgeAddress(tls)
	if tls {
		if httpsProto, err = httpsProtocol(top.AgentHTTPS, top.CAFile); err != nil {
			return
		}
	}
	ports, err := freeport.Take(2)
	if err != nil {
		return
	}
	xdsAddr, adminAddr = "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	return
}

// bridgeAddress is the address of the agent the bridge reads, and the
// consul source keys that go with it (flow-style, after a comma): with
// tls, the agent's HTTPS listener and its CA.
func (top *Topology) bridgeAddress(tls bool) (address, tlsYAML string) {
	if !tls {
		return top.Agent, ""
	}
	return "https://" + top.AgentHTTPS, fmt.Sprintf(", tls: {ca_file: %q}", top.CAFile)
}

// baseAgentConf is what every benchmark agent gets: telemetry (the
// server's read counters), Raft timing as in -dev, and no update check (it
// reaches out to the internet, which a benchmark on loopback has no
// business doing).
const baseAgentConf = consultest.Telemetry + "\nperformance { raft_multiplier = 1 }\ndisable_update_check = true\n"

// writeAgentConf writes each configuration fragment to a file in dir and
// returns the agent arguments that load them.
func writeAgentConf(dir string, confs []string) ([]string, error) {
	var args []string
	for i, c := range confs {
		p := filepath.Join(dir, fmt.Sprintf("agent-%d.hcl", i))
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-config-file", p)
	}
	return args, nil
}

// benchAgent is one Consul agent process of a benchmark. Its arguments,
// ports included, are fixed when it is made, so that it can be stopped and
// started again on the same ports and data directory.
type benchAgent struct {
	bin, logPath, dataDir string
	args                  []string
	// http, https (empty without TLS) and serf are host:port.
	http, https, serf string
	cmd               *exec.Cmd
}

// newBenchAgent prepares an agent called name, started in mode ("agent",
// "-dev"...) with every port on a free loopback port, an HTTPS port with
// tls, and confArgs.
func newBenchAgent(bin, logPath, dataDir, name string, tls bool, mode, confArgs []string) (*benchAgent, error) {
	p, err := freeport.Take(7)
	if err != nil {
		return nil, err
	}
	a := &benchAgent{bin: bin, logPath: logPath, dataDir: dataDir,
		http: "127.0.0.1:" + strconv.Itoa(p[0]), serf: "127.0.0.1:" + strconv.Itoa(p[1])}
	https := "-1"
	if tls {
		https, a.https = strconv.Itoa(p[6]), "127.0.0.1:"+strconv.Itoa(p[6])
	}
	a.args = append(slices.Clone(mode), "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-node", name, "-data-dir", dataDir, "-log-level", "warn",
		"-http-port", strconv.Itoa(p[0]), "-https-port", https, "-dns-port", "-1",
		"-serf-lan-port", strconv.Itoa(p[1]), "-serf-wan-port", strconv.Itoa(p[2]),
		"-server-port", strconv.Itoa(p[3]), "-grpc-port", strconv.Itoa(p[4]), "-grpc-tls-port", strconv.Itoa(p[5]))
	a.args = append(a.args, confArgs...)
	return a, nil
}

// start starts the agent (its log is appended to).
func (a *benchAgent) start() error {
	cmd, err := proc.StartAppend(a.logPath, a.bin, a.args...)
	a.cmd = cmd
	return err
}

// stop stops the agent, if it runs.
func (a *benchAgent) stop() {
	if a.cmd != nil {
		proc.Stop(a.cmd)
		a.cmd = nil
	}
}

func (a *benchAgent) pid() int { return a.cmd.Process.Pid }

// harnessAddr is the loopback address the harness's own requests to the
// agents come from. The agent limits connections per client IP
// (limits.http_max_conns_per_client), and the registrations, churn and
// metrics reads of the harness stand for other programs of a cluster, not
// for the bridge: from another address they leave the bridge the whole
// allowance. Linux routes all of 127.0.0.0/8 to the loopback interface.
const harnessAddr = "127.0.0.2"

// harnessConns bounds the harness's connections to an agent: the
// registration transactions in flight, the churn and the events. It stays
// under any per-client limit a run sets (--agent-hcl) above it.
const harnessConns = txnInFlight + 2

// StartLed is StartTopology followed by a wait for the
// cluster's leader, with a client of the agent the bridge reads. stop ends
// both; call it also after an error.
func StartLed(ctx context.Context, cfg EventsConfig, dir string) (top *Topology, capi *api.Client, stop func(), err error) {
	top, err = StartTopology(cfg, dir)
	tr := HarnessTransport()
	stop = func() {
		tr.CloseIdleConnections()
		top.Stop()
	}
	if err != nil {
		return top, nil, stop, err
	}
	if capi, err = HarnessClient(top.Agent, tr); err != nil {
		return top, nil, stop, err
	}
	if err := proc.Poll(ctx, 60*time.Second, func() bool { l, err := capi.Status().Leader(); return err == nil && l != "" }); err != nil {
		return top, nil, stop, fmt.Errorf("waiting for a Consul leader: %w", err)
	}
	return top, capi, stop, nil
}

// HarnessTransport is the transport of the harness's requests to the
// agents: from harnessAddr, at most harnessConns connections.
func HarnessTransport() *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(harnessAddr)}}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: harnessConns, MaxConnsPerHost: harnessConns}
}

// HarnessClient is a Consul API client of the agent at addr on tr.
func HarnessClient(addr string, tr *http.Transport) (*api.Client, error) {
	return api.NewClient(&api.Config{Address: addr, Transport: tr, HttpClient: &http.Client{Transport: tr}})
}

// httpsProtocol asks the agent's HTTPS API for its leader as the bridge's
// Go client would (HTTP/2 offered by ALPN) and returns the protocol the
// agent answered with, "HTTP/2.0" when it multiplexes requests over one
// connection.
func httpsProtocol(addr, caFile string) (string, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := HarnessTransport()
	tr.TLSClientConfig, tr.ForceAttemptHTTP2 = &tls.Config{RootCAs: pool}, true
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + addr + "/v1/status/leader")
	if err != nil {
		return "", fmt.Errorf("asking the agent over HTTPS: %w", err)
	}
	resp.Body.Close()
	return resp.Proto, nil
}
