package consul

import (
	"context"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestConsulEventsSmall runs the Consul events scenario small, over HTTPS
// with the agents' per-client connection limit lowered: every event kind
// reaches the clients, the agent speaks HTTP/2, the costs are filled in
// and the bridge saw no 429.
func TestConsulEventsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bridge binary and starts two Consul agents")
	}
	consul, bridge := consultest.Binary(t), bridgetest.Binary(t)
	r, err := RunEvents(context.Background(), EventsConfig{
		ConsulBin: consul, BridgeBin: bridge, Topology: "cluster", Clients: 3, Services: 40, Churn: 5, PerEvent: 1,
		TLS: true, AgentHCL: "limits { http_max_conns_per_client = 40 }", Idle: time.Second,
		Timeout: 20 * time.Second, OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range allConsulEvents() {
		if len(r.Events[ev.name]) != 1 || r.Missed[ev.name] != 0 {
			t.Errorf("%s: %v, missed %d", ev.name, r.Events[ev.name], r.Missed[ev.name])
		}
	}
	if r.HTTPSProto != "HTTP/2.0" {
		t.Errorf("the agent's HTTPS API answered with %q, want HTTP/2.0", r.HTTPSProto)
	}
	if r.Setup <= 0 || r.FirstSync <= 0 || r.PeakConnsSync < 1 || r.EventsMade != len(allConsulEvents()) || r.ServerRPC <= 0 || r.IdleMinutes <= 0 {
		t.Errorf("figures missing: %+v", r)
	}
	if r.Bridge429 != 0 {
		t.Errorf("the bridge logged %d 429s", r.Bridge429)
	}
}

func TestHexPort(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90": "127.0.0.1:8080",
		"0200007F:0035": "127.0.0.2:53",
		"garbage":       "garbage",
	} {
		if got := hexPort(in); got != want {
			t.Errorf("hexPort(%q) = %q, want %q", in, got, want)
		}
	}
}
