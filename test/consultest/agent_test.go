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

// TestCluster starts a server and a client agent: a service registered
// with the client is in the server's catalog, the client is no server, and
// the server's RPC counter moves when the client forwards a read.
func TestCluster(t *testing.T) {
	server, client := StartCluster(t)
	if server.HTTPAddr == client.HTTPAddr || server.Node == client.Node || server.DataDir == client.DataDir {
		t.Fatalf("server and client share ports, node name or data directory")
	}
	self, err := client.Client().Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if isServer, _ := self["Config"]["Server"].(bool); isServer {
		t.Error("the client agent runs as a server")
	}
	before, err := Metrics(server.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "s1", Name: "s", Port: 1}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := client.Client().Catalog().Services(nil); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, err := server.Client().Health().Service("s", "", false, nil)
	if err != nil || len(entries) != 1 || entries[0].Node.Node != client.Node {
		t.Fatalf("service s on the server: %v, %v", entries, err)
	}
	after, err := Metrics(server.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	if got := after["consul_rpc_request"] - before["consul_rpc_request"]; got < 5 {
		t.Errorf("server RPC requests moved by %v for 5 forwarded reads", got)
	}
}
