package consul

import (
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestAgentOutage kills the agent: nothing is published (the receiver keeps
// every endpoint), the status turns stale and one warning is logged; when
// the agent returns the source resyncs and is fresh again.
func TestAgentOutage(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	for i, port := range []int{6001, 6002} {
		register(t, c, &api.AgentServiceRegistration{ID: []string{"out-1", "out-2"}[i], Name: "out", Address: "10.0.3.1", Port: port})
	}
	r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"out", "back"}}, "retry_max": "500ms"})
	r.synced(patience)
	r.waitFor(patience, "out has 2 endpoints", func() bool { return len(r.endpointsOf("out")) == 2 })

	// Node maintenance (a node check) drains every instance on the node.
	// (Here rather than in TestWatch: it would touch every test's services.)
	allHealth := func(h sources.Health) func() bool {
		return func() bool {
			eps := r.endpointsOf("out")
			for _, e := range eps {
				if e.Health != h {
					return false
				}
			}
			return len(eps) == 2
		}
	}
	if err := c.Agent().EnableNodeMaintenance("test"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(patience, "out draining", allHealth(sources.HealthDraining))
	if err := c.Agent().DisableNodeMaintenance(); err != nil {
		t.Fatal(err)
	}
	r.waitFor(patience, "out healthy after node maintenance", allHealth(sources.HealthHealthy))
	n := r.updateCount()

	agent.Kill()
	r.waitFor(patience, "status stale", func() bool { return r.status.Snapshot().Stale })
	// Let the retries run for a while: still nothing published, still one
	// warning however many retries failed.
	waitFor(t, patience, "several failed retries", func() bool { return r.status.Snapshot().Failures >= 5 })
	if got := r.updateCount(); got != n {
		t.Fatalf("%d updates published during the outage", got-n)
	}
	if got := r.logs.count(msgFailing); got != 1 {
		t.Errorf("logged %q %d times, want once", msgFailing, got)
	}
	snap := r.status.Snapshot()
	if !snap.Synced || snap.FailingFrom.IsZero() || snap.LastError == "" {
		t.Errorf("status during outage = %+v", snap)
	}

	agent.Restart()
	// The -dev agent comes back with an empty catalog, reloads its
	// persisted services and syncs them into it: the first update after
	// the restart says that Consul lost its state (the removal guard then
	// keeps what the refill has not brought back yet). A service
	// registered after the restart shows that watching works again.
	register(t, agent.Client(), &api.AgentServiceRegistration{ID: "back-1", Name: "back", Address: "10.0.3.2", Port: 6003})
	took := r.waitFor(patience, "resync after restart", func() bool {
		return !r.status.Snapshot().Stale && len(r.endpointsOf("back")) == 1 && len(r.endpointsOf("out")) == 2
	})
	t.Logf("fresh again %v after the restart", took)
	if kinds := r.kindsSince(n); len(kinds) == 0 || kinds[0] != (updateKind{full: true, reset: true}) {
		t.Errorf("updates after the restart = %+v, want the first Full and marked Reset", kinds)
	}
	if got := r.resets(); got != 1 {
		t.Errorf("%d updates marked Reset, want 1", got)
	}
	if got := r.logs.count(msgRecovered); got != 1 {
		t.Errorf("logged %q %d times, want once", msgRecovered, got)
	}
}
