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
	timeout := defaultTimeout
	if connectTimeout != 0 && connectTimeout != DefaultConnectTimeout {
		timeout = durationpb.New(connectTimeout)
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource},
		ConnectTimeout:       timeout,
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}
