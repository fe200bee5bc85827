package dns_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// lbEndpoint is what the test compares of one endpoint in an assignment.
type lbEndpoint struct {
	addr             string
	port             uint32
	weight, priority uint32
}

func lbEndpoints(cla *endpointv3.ClusterLoadAssignment) []lbEndpoint {
	var out []lbEndpoint
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, lbEndpoint{sa.GetAddress(), sa.GetPortValue(), e.GetLoadBalancingWeight().GetValue(), l.GetPriority()})
		}
	}
	slices.SortFunc(out, func(a, b lbEndpoint) int {
		if a.priority != b.priority {
			return int(a.priority) - int(b.priority)
		}
		if a.addr != b.addr {
			if a.addr < b.addr {
				return -1
			}
			return 1
		}
		return int(a.port) - int(b.port)
	})
	return out
}

// TestBridgeDNSToEnvoy runs the whole bridge (DNS source, manager,
// translation, xDS server) against CoreDNS and an Envoy-like ADS client:
// SRV priorities and weights, then record changes, end to end.
func TestBridgeDNSToEnvoy(t *testing.T) {
	// patience bounds each wait: a failure detector that a loaded machine
	// must never reach, and still far below refresh.max (an hour), so that
	// only the refresh the records' TTL schedules can deliver a change.
	const patience = 30 * time.Second
	const ttl = 2 * time.Second
	base := "a 2 IN A 127.0.0.11\nb 2 IN A 127.0.0.12\nc 2 IN A 127.0.0.13\nd 2 IN A 127.0.0.14\n"
	s := dnstest.Start(t, "example.org", base+
		"_api._tcp 2 IN SRV 10 0 8080 a\n_api._tcp 2 IN SRV 10 10 8081 b\n_api._tcp 2 IN SRV 20 60 8082 c\n")

	in := bridgetest.Start(t, fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - name: legacy-dns
    type: dns
    servers: [%q]
    refresh: {min: 100ms, max: 1h}
    services:
      - {cluster: api, srv: _api._tcp.example.org}
`, s.Addr))
	ctx := t.Context()

	client, err := envoysim.Start(ctx, envoysim.Options{Addr: in.XDSAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	wait := func(want []lbEndpoint) time.Time {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, patience)
		defer wcancel()
		err := client.WaitFor(wctx, func(st envoysim.State) bool {
			cla := st.Assignments["api"]
			return cla != nil && slices.Equal(lbEndpoints(cla), want)
		})
		if err != nil {
			t.Fatalf("want %v: %v", want, err)
		}
		return time.Now()
	}

	// SRV priorities 10/20 become 0/1, weights 0/10/60 become 1/10/60.
	wait([]lbEndpoint{{"127.0.0.11", 8080, 1, 0}, {"127.0.0.12", 8081, 10, 0}, {"127.0.0.13", 8082, 60, 1}})

	// Add a target, change a weight, remove a record: each reaches the
	// client at the next refresh (the lag is logged, not asserted).
	steps := []struct {
		name    string
		records string
		srvSum  uint32 // the sum of the SRV weights CoreDNS serves
		want    []lbEndpoint
	}{
		{"add a target", "_api._tcp 2 IN SRV 10 0 8080 a\n_api._tcp 2 IN SRV 10 10 8081 b\n_api._tcp 2 IN SRV 20 60 8082 c\n_api._tcp 2 IN SRV 20 20 8083 d\n", 90,
			[]lbEndpoint{{"127.0.0.11", 8080, 1, 0}, {"127.0.0.12", 8081, 10, 0}, {"127.0.0.13", 8082, 60, 1}, {"127.0.0.14", 8083, 20, 1}}},
		{"change a weight", "_api._tcp 2 IN SRV 10 0 8080 a\n_api._tcp 2 IN SRV 10 30 8081 b\n_api._tcp 2 IN SRV 20 60 8082 c\n_api._tcp 2 IN SRV 20 20 8083 d\n", 110,
			[]lbEndpoint{{"127.0.0.11", 8080, 1, 0}, {"127.0.0.12", 8081, 30, 0}, {"127.0.0.13", 8082, 60, 1}, {"127.0.0.14", 8083, 20, 1}}},
		{"remove a record", "_api._tcp 2 IN SRV 10 30 8081 b\n_api._tcp 2 IN SRV 20 60 8082 c\n_api._tcp 2 IN SRV 20 20 8083 d\n", 110,
			[]lbEndpoint{{"127.0.0.12", 8081, 30, 0}, {"127.0.0.13", 8082, 60, 1}, {"127.0.0.14", 8083, 20, 1}}},
	}
	for _, step := range steps {
		written := time.Now()
		s.SetZone(base + step.records)
		served := s.WaitServes("_api._tcp.example.org", mdns.TypeSRV, func(m *mdns.Msg) bool {
			n := 0
			for _, rr := range m.Answer {
				if _, ok := rr.(*mdns.SRV); ok {
					n++
				}
			}
			return n == len(step.want) && srvWeights(m) == step.srvSum
		}, patience)
		got := wait(step.want)
		t.Logf("%s: served %s after the zone write; at the xDS client %s later (TTL %s)",
			step.name, served.Sub(written).Round(time.Millisecond), got.Sub(served).Round(time.Millisecond), ttl)
	}
}

func srvWeights(m *mdns.Msg) uint32 {
	var sum uint32
	for _, rr := range m.Answer {
		if srv, ok := rr.(*mdns.SRV); ok {
			sum += uint32(srv.Weight)
		}
	}
	return sum
}
