package consul

import (
	"maps"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

func entry(node, nodeAddr string, svc *api.AgentService, checks ...*api.HealthCheck) *api.ServiceEntry {
	if svc.Weights == (api.AgentWeights{}) {
		svc.Weights = api.AgentWeights{Passing: 1, Warning: 1}
	}
	return &api.ServiceEntry{
		Node:    &api.Node{Node: node, Address: nodeAddr, Meta: map[string]string{"zone": "z-" + node}},
		Service: svc,
		Checks:  checks,
	}
}

func check(id, status string) *api.HealthCheck { return &api.HealthCheck{CheckID: id, Status: status} }

func TestMappingEndpoints(t *testing.T) {
	base := mapping{addressSource: AddressService, locality: LocalityConfig{ZoneKey: "zone"}, datacenter: "dc1"}
	// ep builds an endpoint with the metadata every one gets (datacenter,
	// the node meta) besides md.
	ep := func(addr string, port uint32, h sources.Health, w uint32, node string, md map[string]string) sources.Endpoint {
		all := map[string]string{MetaDatacenter: "dc1", MetaNodePrefix + "zone": "z-" + node}
		maps.Copy(all, md)
		return sources.Endpoint{Address: addr, Port: port, Weight: w, Health: h,
			Locality: sources.Locality{Region: "dc1", Zone: "z-" + node}, Metadata: all}
	}
	tests := []struct {
		name          string
		m             func(mapping) mapping
		entries       []*api.ServiceEntry
		want          []sources.Endpoint
		wantDropped   int
		wantHostnames int
	}{
		{
			name: "service address, tags and meta, passing weight",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{
				ID: "web-1", Service: "web", Address: "10.1.0.1", Port: 8080,
				Tags: []string{"v2", "canary", "v2"}, Meta: map[string]string{"version": "2"},
				Weights: api.AgentWeights{Passing: 7, Warning: 2},
			}, check("serfHealth", api.HealthPassing))},
			want: []sources.Endpoint{ep("10.1.0.1", 8080, sources.HealthHealthy, 7, "n1",
				map[string]string{"tags": "canary,v2", "tag:canary": "true", "tag:v2": "true", "version": "2"})},
		},
		{
			name:    "no service address falls back to the node's",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80})},
			want:    []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "address_source node ignores the service address",
			m:    func(m mapping) mapping { m.addressSource = AddressNode; return m },
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{
				Service: "web", Address: "10.1.0.1", Port: 80})},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "tagged address with its own port",
			m:    func(m mapping) mapping { m.addressSource = "wan"; return m },
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{
				Service: "web", Address: "10.1.0.1", Port: 80,
				TaggedAddresses: map[string]api.ServiceAddress{"wan": {Address: "192.0.2.1", Port: 443}}})},
			want: []sources.Endpoint{ep("192.0.2.1", 443, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "missing tagged address falls back to the node's tagged address",
			m:    func(m mapping) mapping { m.addressSource = "lan_ipv4"; return m },
			entries: []*api.ServiceEntry{func() *api.ServiceEntry {
				e := entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80})
				e.Node.TaggedAddresses = map[string]string{"lan_ipv4": "10.9.9.9"}
				return e
			}()},
			want: []sources.Endpoint{ep("10.9.9.9", 80, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "warning is healthy with the warning weight",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80,
				Weights: api.AgentWeights{Passing: 5, Warning: 2}}, check("c", api.HealthWarning), check("d", api.HealthPassing))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthHealthy, 2, "n1", nil)},
		},
		{
			name: "warning: degraded",
			m:    func(m mapping) mapping { m.warningDegraded = true; return m },
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80},
				check("c", api.HealthWarning))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthDegraded, 1, "n1", nil)},
		},
		{
			name: "warning weight 0 means no traffic: unhealthy",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80,
				Weights: api.AgentWeights{Passing: 3, Warning: 0}}, check("c", api.HealthWarning))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthUnhealthy, 1, "n1", nil)},
		},
		{
			name: "weights clamped to 128",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80,
				Weights: api.AgentWeights{Passing: 1 << 20, Warning: 1}})},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthHealthy, 128, "n1", nil)},
		},
		{
			name: "proxies and gateways are left out without counting them",
			entries: []*api.ServiceEntry{
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80}),
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 21000, Kind: api.ServiceKindConnectProxy}),
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 8443, Kind: api.ServiceKindMeshGateway}),
			},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "keep_mesh keeps them",
			m:    func(m mapping) mapping { m.keepMesh = true; return m },
			entries: []*api.ServiceEntry{
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 21000, Kind: api.ServiceKindConnectProxy}),
			},
			want: []sources.Endpoint{ep("10.0.0.1", 21000, sources.HealthHealthy, 1, "n1", nil)},
		},
		{
			name: "a critical node check makes the instance unhealthy",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80},
				check("serfHealth", api.HealthCritical), check("svc", api.HealthPassing))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthUnhealthy, 1, "n1", nil)},
		},
		{
			name: "critical: drop leaves it out without counting it",
			m:    func(m mapping) mapping { m.criticalDrop = true; return m },
			entries: []*api.ServiceEntry{
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80}, check("c", api.HealthCritical)),
				entry("n2", "10.0.0.2", &api.AgentService{Service: "web", Port: 80}, check("c", api.HealthPassing)),
			},
			want: []sources.Endpoint{ep("10.0.0.2", 80, sources.HealthHealthy, 1, "n2", nil)},
		},
		{
			name: "node maintenance drains even when critical",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80},
				check(api.NodeMaint, api.HealthCritical), check("c", api.HealthCritical))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthDraining, 1, "n1", nil)},
		},
		{
			name: "service maintenance drains",
			entries: []*api.ServiceEntry{entry("n1", "10.0.0.1", &api.AgentService{ID: "web-1", Service: "web", Port: 80},
				check(api.ServiceMaintPrefix+"web-1", api.HealthCritical))},
			want: []sources.Endpoint{ep("10.0.0.1", 80, sources.HealthDraining, 1, "n1", nil)},
		},
		{
			name: "hostname, port 0 and a nil entry are dropped and counted",
			entries: []*api.ServiceEntry{
				entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Address: "web.example", Port: 80}),
				entry("n2", "10.0.0.2", &api.AgentService{Service: "web", Port: 0}),
				entry("n3", "10.0.0.3", &api.AgentService{Service: "web", Port: 70000}),
				nil,
				entry("n4", "10.0.0.4", &api.AgentService{Service: "web", Port: 80}),
			},
			want:          []sources.Endpoint{ep("10.0.0.4", 80, sources.HealthHealthy, 1, "n4", nil)},
			wantDropped:   4,
			wantHostnames: 1,
		},
		{
			name: "IPv6 is canonicalised and endpoints come sorted (locality first)",
			entries: []*api.ServiceEntry{
				entry("n2", "10.0.0.2", &api.AgentService{Service: "web", Port: 80}),
				entry("n1", "2001:db8::0001", &api.AgentService{Service: "web", Port: 80}),
			},
			want: []sources.Endpoint{
				ep("2001:db8::1", 80, sources.HealthHealthy, 1, "n1", nil),
				ep("10.0.0.2", 80, sources.HealthHealthy, 1, "n2", nil),
			},
		},
		{
			name: "region from node meta, other datacenter priority",
			m: func(m mapping) mapping {
				m.locality.RegionKey = "region"
				m.priority = 2
				return m
			},
			entries: []*api.ServiceEntry{func() *api.ServiceEntry {
				e := entry("n1", "10.0.0.1", &api.AgentService{Service: "web", Port: 80})
				e.Node.Meta["region"] = "eu"
				return e
			}()},
			want: []sources.Endpoint{{Address: "10.0.0.1", Port: 80, Weight: 1, Priority: 2, Health: sources.HealthHealthy,
				Locality: sources.Locality{Region: "eu", Zone: "z-n1"},
				Metadata: map[string]string{MetaDatacenter: "dc1", "node:zone": "z-n1", "node:region": "eu"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base
			if tc.m != nil {
				m = tc.m(m)
			}
			got, dropped, hostnames := m.endpoints(tc.entries)
			if dropped != tc.wantDropped || hostnames != tc.wantHostnames {
				t.Errorf("dropped = %d, hostnames %d, want %d, %d", dropped, hostnames, tc.wantDropped, tc.wantHostnames)
			}
			if !endpointsEqual(got, tc.want) {
				t.Errorf("endpoints:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
