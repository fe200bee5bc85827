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

// A Rewrite is one way a client fetches the resources that other resources
// refer to: a cluster's endpoints (EDS) and a gRPC listener's routes (RDS).
// Resources are published with ADS config sources ({ads: {}}), right for
// clients that use ADS. A client on per-type streams, polling REST or
// reading files has no ADS in its bootstrap and rejects such a cluster
// ("ADS must be configured to support an ADS config source"), so it is
// served the resource rewritten: its ADS config sources replaced by the
// Rewrite's source.
//
// A resource version is rewritten at most once per Rewrite (on first use)
// and the result shared by every client of that Rewrite, like the
// original; the zero *Rewrite (nil) is ADS itself, which rewrites nothing.
// A rewritten resource's version is the content hash of its own bytes, so
// it differs from the ADS version and is the same on every replica
// configured alike.
type Rewrite struct {
	name string
	// source returns the config source replacing ADS in a resource that
	// refers to ref (an assignment or a route configuration name).
	source func(ref string) *corev3.ConfigSource
}

// NewRewrite returns a Rewrite whose ADS config sources become source(ref),
// ref being the name of the referred resource. source must be pure, and the
// returned message is only read.
func NewRewrite(name string, source func(ref string) *corev3.ConfigSource) *Rewrite {
	return &Rewrite{name: name, source: source}
}

// String returns the Rewrite's name; "ads" for nil.
func (rw *Rewrite) String() string {
	if rw == nil {
		return "ads"
	}
	return rw.name
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

// fixedSource is a Rewrite source that is the same for every reference.
func fixedSource(cs *corev3.ConfigSource) func(string) *corev3.ConfigSource {
	return func(string) *corev3.ConfigSource { return cs }
}

// streamRewrites are the Rewrites of the per-type gRPC streams.
type streamRewrites struct {
	sotw, delta *Rewrite
}

func newStreamRewrites(cluster string) streamRewrites {
	return streamRewrites{
		sotw:  NewRewrite("grpc", fixedSource(APISource(corev3.ApiConfigSource_GRPC, cluster))),
		delta: NewRewrite("delta_grpc", fixedSource(APISource(corev3.ApiConfigSource_DELTA_GRPC, cluster))),
	}
}

// forStream is the Rewrite of a stream: ADS streams keep the original.
func (sr streamRewrites) forStream(ads, delta bool) *Rewrite {
	switch {
	case ads:
		return nil
	case delta:
		return sr.delta
	}
	return sr.sotw
}

// rewriteCache holds an entry as each Rewrite rewrote it, keyed by Rewrite.
// A resource without ADS config sources maps to the entry itself.
type rewriteCache struct {
	mu sync.Mutex
	m  map[*Rewrite]*entry
}

// of returns the entry as clients of rw see it, building it on first use.
// It takes only the entry's own lock, so it is safe under Server.mu and
// client.mu alike; the build (one unmarshal and marshal) happens once per
// version and Rewrite.
func (rw *Rewrite) of(e *entry) *entry {
	if rw == nil || e == nil || e == stale || (e.any.TypeUrl != ClusterType && e.any.TypeUrl != ListenerType) {
		return e
	}
	e.rewritten.mu.Lock()
	defer e.rewritten.mu.Unlock()
	if a, ok := e.rewritten.m[rw]; ok {
		return a
	}
	a, err := rw.build(e)
	if err != nil {
		a = e // cannot happen for a resource that marshalled; serve it as is
	}
	if e.rewritten.m == nil {
		e.rewritten.m = make(map[*Rewrite]*entry, 1)
	}
	e.rewritten.m[rw] = a
	return a
}

// build rewrites the ADS config sources of e's resource; it returns e when
// there are none.
func (rw *Rewrite) build(e *entry) (*entry, error) {
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
		ec.EdsConfig = rw.source(e.edsName)
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
		rds.ConfigSource = rw.source(rds.GetRouteConfigName())
		if err := anypb.MarshalFrom(api, hcm, marshal); err != nil {
			return nil, fmt.Errorf("encoding listener %q: %w", e.name, err)
		}
		msg = l
	default:
		return e, nil
	}
	return newEntry(Resource{Type: e.any.TypeUrl, Name: e.name, Message: msg, GRPCOnly: e.grpcOnly})
}
