package xds

import (
	"fmt"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// DefaultConfigCluster is Options.ConfigCluster when it is empty.
const DefaultConfigCluster = "xds_cluster"

// A Variant is one way a client fetches the resources that other resources
// refer to: a cluster's endpoints (EDS) and a gRPC listener's routes (RDS).
// Resources are published with ADS config sources ({ads: {}}), right for
// clients that use ADS. A client on per-type streams, polling REST or
// reading files has no ADS in its bootstrap and rejects such a cluster
// ("ADS must be configured to support an ADS config source"), so it is
// served a variant whose ADS config sources are replaced by Source.
//
// A variant of a resource version is built at most once (on first use) and
// shared by every client of that variant, like the original; the zero
// *Variant (nil) is ADS itself. Its version is the content hash of the
// variant's bytes, so it differs from the ADS version and is the same on
// every replica configured alike.
type Variant struct {
	name string
	// source returns the config source replacing ADS in a resource that
	// refers to ref (an assignment or a route configuration name).
	source func(ref string) *corev3.ConfigSource
}

// NewVariant returns a variant whose ADS config sources become source(ref),
// ref being the name of the referred resource. source must be pure, and the
// returned message is only read.
func NewVariant(name string, source func(ref string) *corev3.ConfigSource) *Variant {
	return &Variant{name: name, source: source}
}

// String returns the variant's name; "ads" for nil.
func (v *Variant) String() string {
	if v == nil {
		return "ads"
	}
	return v.name
}

// APISource is an api_config_source of the given gRPC API type naming the
// bootstrap's static cluster of the control plane: what an Envoy without
// ads_config needs in a cluster's eds_config (Envoy has no `self` source).
func APISource(api corev3.ApiConfigSource_ApiType, cluster string) *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:             api,
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster},
			}}},
		}},
	}
}

// fixedSource is a Variant source that is the same for every reference.
func fixedSource(cs *corev3.ConfigSource) func(string) *corev3.ConfigSource {
	return func(string) *corev3.ConfigSource { return cs }
}

// streamVariants are the variants of the per-type gRPC streams.
type streamVariants struct {
	sotw, delta *Variant
}

func newStreamVariants(cluster string) streamVariants {
	return streamVariants{
		sotw:  NewVariant("grpc", fixedSource(APISource(corev3.ApiConfigSource_GRPC, cluster))),
		delta: NewVariant("delta_grpc", fixedSource(APISource(corev3.ApiConfigSource_DELTA_GRPC, cluster))),
	}
}

// forStream is the variant of a stream: ADS streams keep the original.
func (sv streamVariants) forStream(ads, delta bool) *Variant {
	switch {
	case ads:
		return nil
	case delta:
		return sv.delta
	}
	return sv.sotw
}

// altCache holds the variants of one entry, keyed by variant. A resource
// without ADS config sources maps to the entry itself.
type altCache struct {
	mu sync.Mutex
	m  map[*Variant]*entry
}

// of returns the entry as clients of v see it, building it on first use.
// It takes only the entry's own lock, so it is safe under Server.mu and
// client.mu alike; the build (one unmarshal and marshal) happens once per
// version and variant.
func (v *Variant) of(e *entry) *entry {
	if v == nil || e == nil || e == stale || (e.any.TypeUrl != ClusterType && e.any.TypeUrl != ListenerType) {
		return e
	}
	e.alt.mu.Lock()
	defer e.alt.mu.Unlock()
	if a, ok := e.alt.m[v]; ok {
		return a
	}
	a, err := v.build(e)
	if err != nil {
		a = e // cannot happen for a resource that marshalled; serve it as is
	}
	if e.alt.m == nil {
		e.alt.m = make(map[*Variant]*entry, 1)
	}
	e.alt.m[v] = a
	return a
}

// build rewrites the ADS config sources of e's resource; it returns e when
// there are none.
func (v *Variant) build(e *entry) (*entry, error) {
	var msg proto.Message
	switch e.any.TypeUrl {
	case ClusterType:
		c := &clusterv3.Cluster{}
		if err := proto.Unmarshal(e.any.Value, c); err != nil {
			return nil, fmt.Errorf("decoding cluster %q: %w", e.name, err)
		}
		ec := c.GetEdsClusterConfig()
		if ec.GetEdsConfig().GetAds() == nil {
			return e, nil
		}
		ec.EdsConfig = v.source(e.edsName)
		msg = c
	case ListenerType:
		l := &listenerv3.Listener{}
		if err := proto.Unmarshal(e.any.Value, l); err != nil {
			return nil, fmt.Errorf("decoding listener %q: %w", e.name, err)
		}
		api := l.GetApiListener().GetApiListener()
		hcm := &hcmv3.HttpConnectionManager{}
		if api == nil || !api.MessageIs(hcm) {
			return e, nil
		}
		if err := api.UnmarshalTo(hcm); err != nil {
			return nil, fmt.Errorf("decoding listener %q: %w", e.name, err)
		}
		rds := hcm.GetRds()
		if rds.GetConfigSource().GetAds() == nil {
			return e, nil
		}
		rds.ConfigSource = v.source(rds.GetRouteConfigName())
		if err := anypb.MarshalFrom(api, hcm, marshal); err != nil {
			return nil, fmt.Errorf("encoding listener %q: %w", e.name, err)
		}
		msg = l
	default:
		return e, nil
	}
	return newEntry(Resource{Type: e.any.TypeUrl, Name: e.name, Message: msg, GRPCOnly: e.grpcOnly})
}
