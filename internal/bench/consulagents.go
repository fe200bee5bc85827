package bench

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/internal/consultest"
	"github.com/xdsbridge/xdsbridge/internal/tlstest"
)

// consulTopology is what startConsulTopology started.
type consulTopology struct {
	// server is the HTTP address of the agent whose telemetry counts the
	// reads that reach the servers; agent that of the agent the bridge
	// and the harness talk to (the same agent in the dev topology).
	server, agent string
	// agentHTTPS is the agent's HTTPS address with TLS, else empty; caFile
	// the CA that signed its certificate.
	agentHTTPS, caFile string
	stop               func()
}

// startConsulTopology starts the agents of cfg.Topology, each with
// telemetry, cfg.AgentHCL and, with cfg.TLS, an HTTPS port whose
// certificate (for 127.0.0.1) is signed by a CA made for this run. The
// agents do not ask for client certificates (verify_incoming false), as
// most agents reached over loopback do not. The agents are not
// consultest's: those belong to a test (testing.TB) and this runs in a
// program; the arguments are the same.
func startConsulTopology(cfg ConsulEventsConfig, dir string) (*consulTopology, error) {
	top := &consulTopology{}
	var procs []func()
	top.stop = func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i]()
		}
	}
	// No update check: it reaches out to the internet, which a benchmark
	// on loopback has no business doing.
	confs := []string{consultest.Telemetry + "\nperformance { raft_multiplier = 1 }\ndisable_update_check = true\n"}
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
		top.caFile = ca.CertFile
		confs = append(confs, fmt.Sprintf("tls { defaults { ca_file = %q, cert_file = %q, key_file = %q, verify_incoming = false } }\n",
			ca.CertFile, pair.CertFile, pair.KeyFile))
	}
	var confArgs []string
	for i, c := range confs {
		p := filepath.Join(dir, fmt.Sprintf("agent-%d.hcl", i))
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			return top, err
		}
		confArgs = append(confArgs, "-config-file", p)
	}
	// start returns the agent's HTTP, HTTPS (or "") and LAN gossip
	// addresses.
	start := func(name string, args ...string) (string, string, string, error) {
		p, err := freePorts(7)
		if err != nil {
			return "", "", "", err
		}
		https, httpsAddr := "-1", ""
		if cfg.TLS {
			https, httpsAddr = strconv.Itoa(p[6]), "127.0.0.1:"+strconv.Itoa(p[6])
		}
		args = append(args, "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
			"-node", name, "-data-dir", filepath.Join(dir, name), "-log-level", "warn",
			"-http-port", strconv.Itoa(p[0]), "-https-port", https, "-dns-port", "-1",
			"-serf-lan-port", strconv.Itoa(p[1]), "-serf-wan-port", strconv.Itoa(p[2]),
			"-server-port", strconv.Itoa(p[3]), "-grpc-port", strconv.Itoa(p[4]), "-grpc-tls-port", strconv.Itoa(p[5]))
		cmd, err := startProc(filepath.Join(cfg.OutDir, "consul-events."+name+".log"), cfg.ConsulBin, append(args, confArgs...)...)
		if err != nil {
			return "", "", "", err
		}
		procs = append(procs, func() { stopProc(cmd) })
		return "127.0.0.1:" + strconv.Itoa(p[0]), httpsAddr, "127.0.0.1:" + strconv.Itoa(p[1]), nil
	}
	if cfg.Topology == "dev" {
		addr, https, _, err := start("dev", "agent", "-dev")
		top.server, top.agent, top.agentHTTPS = addr, addr, https
		return top, err
	}
	server, _, serf, err := start("server", "agent", "-server", "-bootstrap-expect=1")
	if err != nil {
		return top, err
	}
	top.server = server
	top.agent, top.agentHTTPS, _, err = start("client", "agent", "-retry-join", serf, "-retry-interval", "1s")
	return top, err
}

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

// harnessTransport is the transport of the harness's requests to the
// agents: from harnessAddr, at most harnessConns connections.
func harnessTransport() *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(harnessAddr)}}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: harnessConns, MaxConnsPerHost: harnessConns}
}

// harnessClient is a Consul API client of the agent at addr on tr.
func harnessClient(addr string, tr *http.Transport) (*api.Client, error) {
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
	tr := harnessTransport()
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
