package consul_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// TestDefaultsReachClients: with every setting at its default (the
// source's and the removal guard's), a service scaled from 4 instances to
// 1 and a service deregistered reach a connected client, over the agent's
// HTTPS listener and over plain HTTP, and the guard holds neither: they
// are what ordinary operations look like.
func TestDefaultsReachClients(t *testing.T) {
	agents := map[string]func(t *testing.T) (*consultest.Agent, string, string){
		"plain HTTP": func(t *testing.T) (*consultest.Agent, string, string) {
			t.Helper()
			a := consultest.Start(t)
			return a, a.HTTPAddr, ""
		},
		"HTTPS": func(t *testing.T) (*consultest.Agent, string, string) {
			t.Helper()
			opts, source := agentTLS(t)
			a := consultest.Start(t, opts...)
			return a, "https://" + a.HTTPSAddr, source
		},
	}
	for name, start := range agents {
		t.Run(name, func(t *testing.T) {
			agent, addr, extra := start(t)
			defaultsScenario(t, agent, addr, extra)
		})
	}
}

func defaultsScenario(t *testing.T, agent *consultest.Agent, addr, extra string) {
	t.Helper()
	c := agent.Client()
	reg := func(id, name string, port int) {
		t.Helper()
		if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Address: "10.3.0.1", Port: port}); err != nil {
			t.Fatal(err)
		}
	}
	dereg := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if err := c.Agent().ServiceDeregister(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Other services, as a registry has: what changes is a small part.
	for i := range 10 {
		reg(fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d", i), 6000+i)
	}
	for i := range 4 {
		reg(fmt.Sprintf("scaled-%d", i), "scaled", 7000+i)
	}
	reg("gone-0", "gone", 8000)
	reg("gone-1", "gone", 8001)

	in := bridgetest.Start(t, bridgeConfig(addr, extra))
	xdsAddr, adminAddr := in.XDSAddr().String(), in.AdminAddr().String()
	bridgetest.WaitReady(t, adminAddr, patience)
	sctx, scancel := context.WithTimeout(context.Background(), patience)
	cl, err := envoysim.Start(sctx, envoysim.Options{Addr: xdsAddr, Node: "defaults", Delta: true})
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	count := func(name string) func(envoysim.State) int {
		return func(s envoysim.State) int { return len(lbEndpoints(s.Assignments[name])) }
	}
	wait := func(what string, cond func(envoysim.State) bool) time.Duration {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := cl.WaitFor(ctx, cond); err != nil {
			t.Fatalf("%s: not at the client (%v): %s", what, err, cl.State().Summary())
		}
		return time.Since(start)
	}
	wait("every service", func(s envoysim.State) bool {
		return count("scaled")(s) == 4 && count("gone")(s) == 2 && count("other-9")(s) == 1
	})

	dereg("scaled-1", "scaled-2", "scaled-3")
	t.Logf("scaled from 4 instances to 1: at the client after %v",
		wait("scaled to 1 instance", func(s envoysim.State) bool { return count("scaled")(s) == 1 }).Round(time.Millisecond))
	dereg("gone-0", "gone-1")
	t.Logf("service deregistered: at the client after %v",
		wait("gone without endpoints", func(s envoysim.State) bool { return count("gone")(s) == 0 }).Round(time.Millisecond))

	code, body := bridgetest.Get("http://" + adminAddr + "/sources")
	var all []manager.SourceStatus
	if err := json.Unmarshal([]byte(body), &all); code != 200 || err != nil || len(all) != 1 {
		t.Fatalf("/sources = %d %v: %s", code, err, body)
	}
	if st := all[0]; st.GuardHolds != 0 || st.Guard != nil {
		t.Errorf("the removal guard held (guard_holds %d, hold %+v): a scale-down and a deregistration are ordinary", st.GuardHolds, st.Guard)
	}
}
