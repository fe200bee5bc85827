package consul_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// TestEventMatrix runs the whole bridge against a dev agent and against
// the two-agent topology (the bridge talking to a client agent) and times
// each kind of registry change until an Envoy-like delta client has it
// (logged, holdoff included; the benchmarks hold the latency targets).
// Other services with instances keep the catalog from being trivial.
func TestEventMatrix(t *testing.T) {
	// Each topology returns the agent and the source's address and TLS
	// keys. Over HTTPS the agent speaks HTTP/2, and the watches of every
	// service share the source's connections.
	topologies := map[string]func(t *testing.T) (*consultest.Agent, string, string){
		"dev agent": func(t *testing.T) (*consultest.Agent, string, string) {
			t.Helper()
			a := consultest.Start(t)
			return a, a.HTTPAddr, ""
		},
		"server and client": func(t *testing.T) (*consultest.Agent, string, string) {
			t.Helper()
			_, client := consultest.StartCluster(t)
			return client, client.HTTPAddr, ""
		},
		"server and client over HTTPS": func(t *testing.T) (*consultest.Agent, string, string) {
			t.Helper()
			opts, source := agentTLS(t)
			_, client := consultest.StartCluster(t, opts...)
			return client, "https://" + client.HTTPSAddr, source
		},
	}
	for name, start := range topologies {
		t.Run(name, func(t *testing.T) {
			agent, addr, extra := start(t)
			eventMatrix(t, agent, addr, extra)
		})
	}
}

// agentTLS returns the options that give agents an HTTPS listener with a
// certificate for 127.0.0.1 from a CA made for the test, and the keys of a
// source entry that trust that CA.
func agentTLS(t *testing.T) ([]consultest.Option, string) {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "consul")
	pair := ca.Issue(dir, "agent", "127.0.0.1", "localhost")
	return []consultest.Option{consultest.WithHTTPS(), consultest.WithHCL(fmt.Sprintf(
			`tls { defaults { ca_file = %q, cert_file = %q, key_file = %q } }`, ca.CertFile, pair.CertFile, pair.KeyFile))},
		fmt.Sprintf("    tls: {ca_file: %q}\n", ca.CertFile)
}

func eventMatrix(t *testing.T, agent *consultest.Agent, addr, extra string) {
	t.Helper()
	c := agent.Client()
	reg := func(r *api.AgentServiceRegistration) {
		t.Helper()
		if err := c.Agent().ServiceRegister(r); err != nil {
			t.Fatal(err)
		}
	}
	ttlCheck := func(id string) *api.AgentServiceCheck {
		return &api.AgentServiceCheck{CheckID: id + "-ttl", TTL: "10m", Status: api.HealthPassing}
	}
	for i := range 20 {
		for j := range 3 {
			reg(&api.AgentServiceRegistration{ID: fmt.Sprintf("bg-%d-%d", i, j), Name: fmt.Sprintf("bg-%d", i),
				Address: "10.1.0.1", Port: 1000 + j, Check: ttlCheck(fmt.Sprintf("bg-%d-%d", i, j))})
		}
	}
	// The service under test: two instances with passing checks, one
	// without checks.
	reg(&api.AgentServiceRegistration{ID: "ev-1", Name: "ev", Address: "10.2.0.1", Port: 7001, Check: ttlCheck("ev-1")})
	reg(&api.AgentServiceRegistration{ID: "ev-2", Name: "ev", Address: "10.2.0.2", Port: 7002, Check: ttlCheck("ev-2")})
	reg(&api.AgentServiceRegistration{ID: "ev-3", Name: "ev", Address: "10.2.0.3", Port: 7003})

	// Default settings, the removal guard's included: emptying one
	// service of many is an ordinary change.
	in := bridgetest.Start(t, bridgeConfig(addr, extra))
	bridgetest.WaitReady(t, in.AdminAddr().String(), patience)
	sctx, scancel := context.WithTimeout(context.Background(), patience)
	cl, err := envoysim.Start(sctx, envoysim.Options{Addr: in.XDSAddr().String(), Node: "events", Delta: true})
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	health := func(port uint32) func(envoysim.State) (corev3.HealthStatus, bool) {
		return func(s envoysim.State) (corev3.HealthStatus, bool) {
			e, ok := lbEndpoints(s.Assignments["ev"])[port]
			return e.GetHealthStatus(), ok
		}
	}
	is := func(port uint32, want corev3.HealthStatus) func(envoysim.State) bool {
		return func(s envoysim.State) bool { h, ok := health(port)(s); return ok && h == want }
	}
	gone := func(port uint32) func(envoysim.State) bool {
		return func(s envoysim.State) bool { _, ok := health(port)(s); return !ok && s.Assignments["ev"] != nil }
	}
	step := func(what string, change func(), cond func(envoysim.State) bool) {
		t.Helper()
		start := time.Now()
		change()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := cl.WaitFor(ctx, cond); err != nil {
			st := cl.State()
			t.Fatalf("%s: not at the client (%v): ev = %v", what, err, lbEndpoints(st.Assignments["ev"]))
		}
		t.Logf("%-40s %v", what, time.Since(start).Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := cl.WaitFor(ctx, func(s envoysim.State) bool { return len(lbEndpoints(s.Assignments["ev"])) == 3 }); err != nil {
		t.Fatalf("ev with 3 endpoints: %v", err)
	}
	ttl := func(status string) func() {
		return func() {
			if err := c.Agent().UpdateTTL("ev-1-ttl", "", status); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("healthy instance deregistered", func() { _ = c.Agent().ServiceDeregister("ev-2") }, gone(7002))
	step("instance added, passing", func() {
		reg(&api.AgentServiceRegistration{ID: "ev-4", Name: "ev", Address: "10.2.0.4", Port: 7004, Check: ttlCheck("ev-4")})
	}, is(7004, corev3.HealthStatus_HEALTHY))
	step("instance added without checks", func() {
		reg(&api.AgentServiceRegistration{ID: "ev-5", Name: "ev", Address: "10.2.0.5", Port: 7005})
	}, is(7005, corev3.HealthStatus_HEALTHY))
	step("port change by re-registration", func() {
		reg(&api.AgentServiceRegistration{ID: "ev-5", Name: "ev", Address: "10.2.0.5", Port: 7055})
	}, func(s envoysim.State) bool { return gone(7005)(s) && is(7055, corev3.HealthStatus_HEALTHY)(s) })
	step("check critical", ttl(api.HealthCritical), is(7001, corev3.HealthStatus_UNHEALTHY))
	step("check passing again", ttl(api.HealthPassing), is(7001, corev3.HealthStatus_HEALTHY))
	step("maintenance on", func() {
		if err := c.Agent().EnableServiceMaintenance("ev-1", "test"); err != nil {
			t.Fatal(err)
		}
	}, is(7001, corev3.HealthStatus_DRAINING))
	step("maintenance off", func() {
		if err := c.Agent().DisableServiceMaintenance("ev-1"); err != nil {
			t.Fatal(err)
		}
	}, is(7001, corev3.HealthStatus_HEALTHY))
	step("whole service deregistered", func() {
		for _, id := range []string{"ev-1", "ev-3", "ev-4", "ev-5"} {
			_ = c.Agent().ServiceDeregister(id)
		}
	}, func(s envoysim.State) bool {
		return s.Assignments["ev"] != nil && len(lbEndpoints(s.Assignments["ev"])) == 0
	})
}
