package consultest

import (
	"testing"
	"time"
)

// Telemetry is the configuration fragment StartCluster gives both agents:
// Prometheus-format metrics at /v1/agent/metrics?format=prometheus, whose
// counters (consul_rpc_request, consul_rpc_query, ...) are cumulative, so
// a test or benchmark can count the reads that reach the server.
const Telemetry = `telemetry { prometheus_retention_time = "1h", disable_hostname = true }`

// StartCluster runs the topology users run: a server agent (-server
// -bootstrap-expect=1) and a client agent joined to it (-retry-join to the
// server's LAN gossip port), each with its own ports, node name and data
// directory, both with Telemetry. Options apply to both agents. It
// returns once the client sees a leader and is in the catalog. Programs
// talk to the client, as they would on a node of a real cluster; the
// client agent uses the streaming backend (its default since 1.10) for
// cached and blocking health reads.
func StartCluster(t testing.TB, opts ...Option) (server, client *Agent) {
	t.Helper()
	opts = append([]Option{WithHCL(Telemetry)}, opts...)
	server, so := newAgent(t, opts)
	// Raft timing as in -dev, so that the single server elects itself at
	// once; and no anti-entropy delay for the client's registrations.
	server.args = append([]string{"agent", "-server", "-bootstrap-expect=1"}, server.args...)
	server.args = append(server.args, "-hcl", "performance { raft_multiplier = 1 }")
	server.launch(so)

	client, co := newAgent(t, opts)
	client.args = append([]string{"agent", "-retry-join", server.SerfLANAddr, "-retry-interval", "1s"}, client.args...)
	client.launch(co)
	client.waitInCatalog(30 * time.Second)
	return server, client
}

// waitInCatalog polls until the agent's node is registered in the catalog
// (a client agent registers itself shortly after joining).
func (a *Agent) waitInCatalog(limit time.Duration) {
	a.t.Helper()
	c := a.Client()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		n, _, err := c.Catalog().Node(a.Node, nil)
		if err == nil && n != nil && n.Node != nil {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent %s not in the catalog after %v (%v)", a.Node, limit, err)
		}
		<-tick.C
	}
}
