package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/countproxy"
)

// TestReloadReplacementSharesAgentConnections changes the entry of a
// Consul source of 500 services over plain HTTP, more than its budget of
// the agent's connections can watch: the new instance runs beside the old
// one until it has synced, and the two share the agent's budget, so the
// agent refuses none of their connections (no 429, counted at a proxy in
// front of it) and no client loses a service; once the old instance has
// stopped, the new one watches as many services as the old one did.
func TestReloadReplacementSharesAgentConnections(t *testing.T) {
	const services = 500
	agent := consultest.Start(t)
	names := registerBulk(t, agent, services)
	proxy, err := countproxy.HTTP(agent.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	consul := func(maxStale string) string {
		return fmt.Sprintf(`  - name: consul
    type: consul
    address: %s
    max_stale: %s
    services: {include: ["svc-*"]}
`, proxy.Addr, maxStale) + sentinelSource
	}
	b := startReloadable(t, consul("5s"))
	watchers := watchBoth(t, b.xdsAddr, names)
	for _, w := range watchers {
		w.serves(t, "the Consul services", nil)
	}
	// Its watches fill the old instance's budget before the reload.
	watching := func(what string, want func(n int) bool) (n int, note string) {
		bridgetest.Eventually(t, patience, what, func() bool {
			note = bridgetest.SourceStatus(t, b.adminAddr, "consul").Notes["watches"]
			total := 0
			_, _ = fmt.Sscanf(note, "%d of %d services watched", &n, &total)
			return total == services && want(n) && strings.Contains(note, fmt.Sprintf("room for %d ", n))
		})
		return n, note
	}
	held, before := watching("the old instance watching as many services as it has room for", func(n int) bool { return n > 0 })
	counts := proxy.Counts()

	reloaded := time.Now()
	b.reload(t, consul("10s"))
	b.waitLog(patience, "configuration reloaded", "started=consul")
	waitPhase(t, b.adminAddr, "consul", "synced")
	synced := time.Since(reloaded)
	flushed(t, b.sentinel, "10.9.0.2", watchers)
	noRemovals(t, "the new Consul instance synced", watchers...)
	_, after := watching(fmt.Sprintf("the new instance watching %d services, as the old one did", held), func(n int) bool { return n == held })
	noRemovals(t, "the old instance's share returned to the new one", watchers...)

	got := proxy.Counts().Sub(counts)
	short := func(note string) string {
		n, _, _ := strings.Cut(note, " (")
		return n
	}
	t.Logf("during the replacement: %d connections and %d requests to the agent, %d refused with 429; the new instance synced %v after the SIGHUP; before it %s, after it %s",
		got.Conns, got.Requests, got.TooMany, synced.Round(time.Millisecond), short(before), short(after))
	if got.TooMany != 0 {
		t.Errorf("the agent refused %d connections with 429 during the replacement, want none", got.TooMany)
	}
	// The new instance opens its connections as it syncs on its share,
	// and the rest once the old one's share returns to it: about the
	// budget of one instance alone (three quarters of the agent's default
	// limit of 200). Twice that bounds it on a loaded machine, where a
	// read may time out and its connection be opened again.
	const budget = 150
	if got.Conns > 2*budget {
		t.Errorf("%d connections opened during the replacement, want at most %d", got.Conns, 2*budget)
	}
}

// registerBulk registers n services svc-000... with one instance each in
// the catalog (on a node of their own, which the agent's anti-entropy
// leaves alone), through transactions, and returns their names.
func registerBulk(t *testing.T, agent *consultest.Agent, n int) []string {
	t.Helper()
	c := agent.Client()
	names := make([]string, n)
	const node = "bulk-node"
	ops := api.TxnOps{{Node: &api.NodeTxnOp{Verb: api.NodeSet, Node: api.Node{Node: node, Address: "10.3.255.1"}}}}
	flush := func() {
		if ok, resp, _, err := c.Txn().Txn(ops, nil); err != nil || !ok {
			t.Fatalf("registering: %v %+v", err, resp)
		}
		ops = nil
	}
	for i := range n {
		names[i] = fmt.Sprintf("svc-%03d", i)
		ops = append(ops, &api.TxnOp{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: node,
			Service: api.AgentService{ID: names[i] + "-1", Service: names[i], Address: fmt.Sprintf("10.3.%d.%d", i/250, 1+i%250), Port: 8080}}})
		if len(ops) == 64 {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
	return names
}
