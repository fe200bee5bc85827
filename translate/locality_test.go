package translate

import (
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// cutoverService is web as the weighted merge serves it 90/10 between a
// DNS source and a Consul source whose endpoints span two zones and a
// failover priority (see manager.MergeWeighted).
var cutoverService = sources.Service{
	Name: "web",
	Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 80, Health: sources.HealthHealthy, Locality: sources.Locality{SubZone: "legacy-dns"}},
		{Address: "10.0.0.2", Port: 80, Weight: 3, Health: sources.HealthHealthy, Locality: sources.Locality{SubZone: "legacy-dns"}},
		{Address: "10.1.0.1", Port: 80, Health: sources.HealthHealthy, Locality: sources.Locality{Region: "eu", Zone: "eu-1a", SubZone: "consul"}},
		{Address: "10.1.0.2", Port: 80, Health: sources.HealthHealthy, Locality: sources.Locality{Region: "eu", Zone: "eu-1b", SubZone: "consul"}},
		{Address: "10.2.0.1", Port: 80, Priority: 1, Health: sources.HealthHealthy, Locality: sources.Locality{Region: "us", SubZone: "consul"}},
	},
	Localities: []sources.LocalityWeight{
		{Priority: 0, Locality: sources.Locality{SubZone: "legacy-dns"}, Weight: 90000},
		{Priority: 0, Locality: sources.Locality{Region: "eu", Zone: "eu-1a", SubZone: "consul"}, Weight: 5000},
		{Priority: 0, Locality: sources.Locality{Region: "eu", Zone: "eu-1b", SubZone: "consul"}, Weight: 5000},
		{Priority: 1, Locality: sources.Locality{Region: "us", SubZone: "consul"}, Weight: 10000},
	},
}

// The weighted goldens join the shared table, so that -update covers them.
func init() {
	goldenCases = append(goldenCases,
		struct {
			name string
			svc  sources.Service
			opts Options
		}{name: "weighted", svc: cutoverService},
		struct {
			name string
			svc  sources.Service
			opts Options
		}{name: "weighted-grpc", svc: cutoverService, opts: Options{GRPC: true}},
	)
}

func TestGroupWeight(t *testing.T) {
	dns := sources.Locality{SubZone: "legacy-dns"}
	tests := []struct {
		name string
		svc  sources.Service
		p    uint32
		l    sources.Locality
		want uint32
	}{
		{"no table: the endpoint sum", sources.Service{}, 0, dns, 7},
		{"in the table", cutoverService, 0, dns, 90000},
		{"same locality, other priority: the sum", cutoverService, 1, dns, 7},
		{"empty table: the sum", sources.Service{Localities: []sources.LocalityWeight{}}, 0, dns, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := groupWeight(tt.svc, tt.p, tt.l, 7); got != tt.want {
				t.Errorf("groupWeight = %d, want %d", got, tt.want)
			}
		})
	}
}
