package translate

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// adsSource points a cluster's EDS or a listener's RDS at the ADS stream the
// client already has. Shared by every resource: never modify it.
var adsSource = &corev3.ConfigSource{
	ResourceApiVersion:    corev3.ApiVersion_V3,
	ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
}

// defaultTimeout is DefaultConnectTimeout as a proto, shared likewise.
var defaultTimeout = durationpb.New(DefaultConnectTimeout)

// Cluster builds the EDS cluster name, whose endpoints come over ADS as the
// ClusterLoadAssignment of the same name. It stays minimal on purpose:
// grpc-go validates clusters strictly and rejects fields it does not know
// how to honour. A zero timeout means DefaultConnectTimeout.
func Cluster(name string, connectTimeout time.Duration) *clusterv3.Cluster {
	// One allocation for the cluster and its oneof and EDS wrappers.
	s := &struct {
		c   clusterv3.Cluster
		typ clusterv3.Cluster_Type
		eds clusterv3.Cluster_EdsClusterConfig
	}{}
	s.typ.Type = clusterv3.Cluster_EDS
	s.eds.EdsConfig = adsSource
	s.c.Name = name
	s.c.ClusterDiscoveryType = &s.typ
	s.c.EdsClusterConfig = &s.eds
	s.c.ConnectTimeout = defaultTimeout
	if connectTimeout != 0 && connectTimeout != DefaultConnectTimeout {
		s.c.ConnectTimeout = durationpb.New(connectTimeout)
	}
	s.c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	return &s.c
}
