package dns

import (
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// Consul's DNS interface as a second real server.
// `web.service.consul` SRV yields the healthy instances of web with their
// own ports and addresses (Consul puts their A records in the additional
// section), and a deregistration reaches the source.
func TestConsulDNS(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	for _, r := range []*consulapi.AgentServiceRegistration{
		{ID: "web-1", Name: "web", Address: "127.0.0.31", Port: 8081},
		{ID: "web-2", Name: "web", Address: "127.0.0.32", Port: 8082},
	} {
		if err := c.Agent().ServiceRegister(r); err != nil {
			t.Fatal(err)
		}
	}

	cfg := baseConfig([]string{agent.DNSAddr}, srvService("web", "web.service.consul"))
	cfg["refresh"] = map[string]any{"min": "200ms", "max": "5s"}
	ups, st := watch(t, cfg)
	u := nextUpdate(t, ups)
	got := u.Services[0].Endpoints
	wantAddrs := []string{"127.0.0.31:8081", "127.0.0.32:8082"}
	if !u.Full || u.Services[0].Name != "web" || !slices.Equal(hostPorts(got), wantAddrs) {
		t.Fatalf("first update %+v, want web with %v", u.Update, wantAddrs)
	}
	for _, e := range got {
		if e.Weight < 1 || e.Priority != 0 {
			t.Errorf("endpoint %+v: want weight >= 1 and priority 0", e)
		}
	}
	if snap := st.Snapshot(); !snap.Synced || snap.Dropped != 0 {
		t.Errorf("status %+v", snap)
	}

	// Consul's DNS TTL is 0 by default: the source refreshes at
	// refresh.min, and a deregistration shows up at the next refresh.
	removed := time.Now()
	if err := c.Agent().ServiceDeregister("web-2"); err != nil {
		t.Fatal(err)
	}
	u = nextUpdate(t, ups)
	if len(u.Services) != 1 || !slices.Equal(hostPorts(u.Services[0].Endpoints), []string{"127.0.0.31:8081"}) {
		t.Fatalf("update after deregistration %+v", u.Update)
	}
	t.Logf("deregistration reached the source after %s", u.at.Sub(removed).Round(time.Millisecond))
}

func hostPorts(eps []sources.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port))))
	}
	slices.Sort(out)
	return out
}

// TestConsulDNSManyInstances registers 100 instances of one service: over
// UDP, Consul's DNS interface trims the answer to the EDNS size without
// setting TC, so the default transport (auto: TCP for .consul names) must
// see every one of them.
func TestConsulDNSManyInstances(t *testing.T) {
	agent := consultest.Start(t)
	c := agent.Client()
	const n = 100
	for i := range n {
		r := &consulapi.AgentServiceRegistration{ID: "many-" + strconv.Itoa(i), Name: "many",
			Address: "127.1.0." + strconv.Itoa(i+1), Port: 9000 + i}
		if err := c.Agent().ServiceRegister(r); err != nil {
			t.Fatal(err)
		}
	}
	count := func(transport string) int {
		cfg := baseConfig([]string{agent.DNSAddr}, srvService("many", "many.service.consul"))
		cfg["timeout"] = "2s"
		cfg["transport"] = transport
		ups, _ := watch(t, cfg)
		u := nextUpdate(t, ups)
		return len(u.Services[0].Endpoints)
	}
	if got := count(TransportAuto); got != n {
		t.Fatalf("transport auto saw %d of %d instances", got, n)
	}
	t.Logf("transport udp saw %d of %d instances", count(TransportUDP), n)
}
