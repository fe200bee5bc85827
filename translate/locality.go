package translate

import (
	"cmp"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// withLocalityWeights sets locality-weighted load balancing on c, fresh
// from Cluster, when svc fixes its locality weights (Service.Localities):
// Envoy then picks a locality by its weight before an endpoint in it;
// without it Envoy ignores locality weights and picks among all the
// endpoints of a priority. gRPC always weighs localities. The message is
// allocated per cluster rather than shared, because cluster shaping merges
// fragments into common_lb_config.
func withLocalityWeights(c *clusterv3.Cluster, svc sources.Service) {
	if svc.Localities != nil {
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{
			LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
			},
		}
	}
}

// groupWeight returns the weight of the endpoints of svc at (model)
// priority p and locality l: the one svc.Localities fixes, else sum, the
// sum of the group's endpoint weights.
func groupWeight(svc sources.Service, p uint32, l sources.Locality, sum uint32) uint32 {
	if svc.Localities == nil {
		return sum
	}
	i, ok := slices.BinarySearchFunc(svc.Localities, sources.LocalityWeight{Priority: p, Locality: l},
		func(a, b sources.LocalityWeight) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.Locality.Compare(b.Locality))
		})
	if !ok {
		return sum
	}
	return svc.Localities[i].Weight
}
