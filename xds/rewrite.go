package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/xdsbridge/xdsbridge/xds/wire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	// The typed configurations a listener or cluster holds its config
	// sources in: rewriting and redacting decode them.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// DefaultConfigCluster is Options.ConfigCluster when it is empty.
const DefaultConfigCluster = "xds_cluster"

// A Rewrite is one way a client fetches the resources that other resources
// refer to: a cluster's endpoints (EDS), a listener's routes (RDS), and the
// secrets (SDS) of their TLS contexts.
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

// configSourceName is the message every xDS reference holds its source in.
var configSourceName = (&corev3.ConfigSource{}).ProtoReflect().Descriptor().FullName()

// sources replaces, in place, every ADS config source in m by the
// Rewrite's, descending into the Anys of typed configurations, and
// reports whether it replaced any. The reference a source is for is the
// name beside it (an Rds's route_config_name, an SDS secret's name, an
// EDS config's service_name), else fallback (a cluster's EDS name).
func (rw *Rewrite) sources(m protoreflect.Message, fallback string) (bool, error) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return false, nil // a type this binary does not know holds nothing to rewrite here
		}
		changed, err := rw.sources(inner.ProtoReflect(), fallback)
		if err != nil || !changed {
			return false, err
		}
		return true, anypb.MarshalFrom(a, inner, wire.Deterministic)
	}
	changed := false
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		md := fd.Message()
		switch {
		case md == nil || fd.IsMap():
			return true
		case md.FullName() == configSourceName && !fd.IsList():
			if cs := v.Message().Interface().(*corev3.ConfigSource); cs.GetAds() != nil {
				m.Set(fd, protoreflect.ValueOfMessage(rw.source(refBeside(m, fallback)).ProtoReflect()))
				changed = true
			}
		case fd.IsList():
			for i := range v.List().Len() {
				var c bool
				if c, err = rw.sources(v.List().Get(i).Message(), fallback); err != nil {
					return false
				}
				changed = changed || c
			}
		default:
			var c bool
			if c, err = rw.sources(v.Message(), fallback); err != nil {
				return false
			}
			changed = changed || c
		}
		return true
	})
	return changed, err
}

// refBeside is the name of what a config source in m fetches: m's
// route_config_name, service_name or name, whichever is set, else
// fallback.
func refBeside(m protoreflect.Message, fallback string) string {
	fields := m.Descriptor().Fields()
	for _, n := range []protoreflect.Name{"route_config_name", "service_name", "name"} {
		if fd := fields.ByName(n); fd != nil && fd.Kind() == protoreflect.StringKind {
			if s := m.Get(fd).String(); s != "" {
				return s
			}
		}
	}
	return fallback
}
