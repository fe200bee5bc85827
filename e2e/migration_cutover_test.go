package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestMigrationWeightedCutover dumps the weighted-cutover example against a
// real CoreDNS running the example's own Corefile and zone, and a real
// Consul agent: one cluster web with
// locality-weighted load balancing, the DNS endpoints in a locality of
// weight 90,000 and the Consul ones in one of 10,000. e2e/cutover measures
// the traffic split with grpc-go.
func TestMigrationWeightedCutover(t *testing.T) {
	config := filepath.Join(migration, "weighted-cutover", "bridge.yaml")
	validate(t, config)
	dns := exampleDNS(t)
	agent := consultest.Start(t)
	if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: "web-1", Name: "web", Address: "10.0.8.1", Port: 8080}); err != nil {
		t.Fatal(err)
	}
	d := dump(t, rewrite(t, rewrite(t, config, "127.0.0.1:5353", dns), "127.0.0.1:8500", agent.HTTPAddr))
	web := d.clusters["web"]
	if _, ok := web.GetCommonLbConfig().GetLocalityConfigSpecifier().(*clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_); !ok {
		t.Errorf("cluster web = %v; want locality_weighted_lb_config", web)
	}
	weights := map[string]uint32{}
	for _, l := range d.assignments["web"].GetEndpoints() {
		weights[l.GetLocality().GetSubZone()] = l.GetLoadBalancingWeight().GetValue()
	}
	if weights["legacy-dns"] != 90000 || weights["consul"] != 10000 || len(weights) != 2 {
		t.Errorf("locality weights by sub-zone %v, want legacy-dns 90000 and consul 10000", weights)
	}
	if got := addresses(d.assignments["web"]); !slices.Equal(got, []string{"10.0.7.1:8080", "10.0.7.2:8080", "10.0.8.1:8080"}) {
		t.Errorf("web endpoints %v", got)
	}
}
