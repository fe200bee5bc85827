package consultest

import (
	"testing"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTwoAgentsRestart starts two agents side by side (no port collides)
// and restarts one on the same ports with its persisted services.
func TestTwoAgentsRestart(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.HTTPAddr == b.HTTPAddr || a.Node == b.Node {
		t.Fatalf("agents share %s / %s", a.HTTPAddr, a.Node)
	}
	c := a.Client()
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "s1", Name: "s", Port: 1}); err != nil {
		t.Fatal(err)
	}
	addr := a.HTTPAddr
	a.Kill()
	if _, err := c.Agent().Services(); err == nil {
		t.Fatal("agent still answers after Kill")
	}
	a.Restart()
	if a.HTTPAddr != addr {
		t.Fatalf("restarted on %s, want %s", a.HTTPAddr, addr)
	}
	svcs, err := a.Client().Agent().Services()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := svcs["s1"]; !ok {
		t.Errorf("service s1 not restored after restart: %v", svcs)
	}
}
