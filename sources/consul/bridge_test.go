package consul_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// TestBridge runs the whole bridge in-process with a consul source and
// checks what Envoy-like clients (SotW and delta ADS) see: registrations
// and a failing check end to end (latency logged), a
// deregistration, and staleness on the admin API while the agent is down.
func TestBridge(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	in := bridgetest.Start(t, bridgeConfig(agent.HTTPAddr, "    retry_max: 500ms\n"))
	xdsAddr, adminAddr := in.XDSAddr().String(), in.AdminAddr().String()
	bridgetest.WaitReady(t, adminAddr, patience)

	clients := map[string]*envoysim.Client{}
	for name, delta := range map[string]bool{"sotw": false, "delta": true} {
		sctx, scancel := context.WithTimeout(context.Background(), patience)
		cl, err := envoysim.Start(sctx, envoysim.Options{Addr: xdsAddr, Node: name, Delta: delta})
		scancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		clients[name] = cl
	}
	waitAll := func(within time.Duration, what string, cond func(envoysim.State) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for name, cl := range clients {
			wctx, wcancel := context.WithTimeout(context.Background(), within-time.Since(start))
			err := cl.WaitFor(wctx, cond)
			wcancel()
			if err != nil {
				t.Fatalf("%s client: not within %v: %s (%v)\n%s", name, within, what, err, cl.State().Summary())
			}
		}
		return time.Since(start)
	}

	register := func(reg *api.AgentServiceRegistration) {
		t.Helper()
		if err := c.Agent().ServiceRegister(reg); err != nil {
			t.Fatal(err)
		}
	}
	register(&api.AgentServiceRegistration{ID: "web-1", Name: "web", Address: "10.0.0.1", Port: 8081,
		Tags: []string{"v1", "primary"}, Meta: map[string]string{"version": "1"}, Weights: &api.AgentWeights{Passing: 5, Warning: 1},
		Check: &api.AgentServiceCheck{CheckID: "web-1-ttl", TTL: "10m", Status: api.HealthPassing}})
	register(&api.AgentServiceRegistration{ID: "web-2", Name: "web", Address: "10.0.0.2", Port: 8082,
		Tags: []string{"v1"}, Weights: &api.AgentWeights{Passing: 3, Warning: 1}})
	register(&api.AgentServiceRegistration{ID: "api-1", Name: "api", Address: "10.0.0.3", Port: 9091})
	took := waitAll(patience, "clusters web (2 endpoints) and api (1)", func(s envoysim.State) bool {
		return s.Clusters["web"] != nil && s.Clusters["api"] != nil &&
			len(lbEndpoints(s.Assignments["web"])) == 2 && len(lbEndpoints(s.Assignments["api"])) == 1
	})
	t.Logf("registrations visible to both clients after %v", took)
	web := lbEndpoints(clients["delta"].State().Assignments["web"])
	if e := web[8081]; e.GetLoadBalancingWeight().GetValue() != 5 || e.GetHealthStatus() != corev3.HealthStatus_HEALTHY ||
		e.GetMetadata().GetFilterMetadata()["envoy.lb"].GetFields()["tags"].GetStringValue() != "primary,v1" ||
		e.GetMetadata().GetFilterMetadata()["envoy.lb"].GetFields()["version"].GetStringValue() != "1" {
		t.Errorf("web-1 = %v", e)
	}
	if e := web[8082]; e.GetLoadBalancingWeight().GetValue() != 3 {
		t.Errorf("web-2 = %v", e)
	}

	if err := c.Agent().UpdateTTL("web-1-ttl", "", api.HealthCritical); err != nil {
		t.Fatal(err)
	}
	took = waitAll(patience, "web-1 UNHEALTHY", func(s envoysim.State) bool {
		return lbEndpoints(s.Assignments["web"])[8081].GetHealthStatus() == corev3.HealthStatus_UNHEALTHY
	})
	t.Logf("critical check visible to both clients after %v", took)

	if err := c.Agent().ServiceDeregister("api-1"); err != nil {
		t.Fatal(err)
	}
	waitAll(patience, "api empty", func(s envoysim.State) bool {
		return s.Clusters["api"] != nil && s.Assignments["api"] != nil && len(lbEndpoints(s.Assignments["api"])) == 0
	})

	agent.Kill()
	bridgetest.Eventually(t, patience, "/sources to report consul stale", func() bool {
		_, body := bridgetest.Get("http://" + adminAddr + "/sources")
		return strings.Contains(body, `"stale": true`)
	})
	for name, cl := range clients {
		if n := len(lbEndpoints(cl.State().Assignments["web"])); n != 2 {
			t.Errorf("%s client: web has %d endpoints while the agent is down, want 2", name, n)
		}
	}
}

// patience bounds every wait of these tests for the bridge (ready, a
// change reaching a client, the status turning stale): the project's
// shared failure detector. The tests assert outcomes; latency is the
// benchmarks' to measure, and the tests log what they see.
const patience = bridgetest.Patience

// bridgeConfig is the configuration of a bridge on loopback with one
// consul source reading the agent at addr; extra holds more keys of the
// source, indented.
func bridgeConfig(addr, extra string) string {
	return fmt.Sprintf(`
xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - name: consul
    type: consul
    address: %q
`, addr) + extra
}

func lbEndpoints(cla *endpointv3.ClusterLoadAssignment) map[uint32]*endpointv3.LbEndpoint {
	m := map[uint32]*endpointv3.LbEndpoint{}
	for _, le := range cla.GetEndpoints() {
		for _, e := range le.GetLbEndpoints() {
			m[e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()] = e
		}
	}
	return m
}
