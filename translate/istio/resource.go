package istio

import (
	"fmt"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcpv1alpha1 "istio.io/api/mcp/v1alpha1"
)

// Kind is an Istio configuration kind, served as one MCP collection.
type Kind string

// The kinds served.
const (
	ServiceEntry  Kind = "ServiceEntry"
	WorkloadEntry Kind = "WorkloadEntry"
)

// TypeURLs are the collection type URLs under which istiod asks for the
// kind's resources: networking.istio.io/v1/<Kind> from Istio 1.24 on (the
// version its CRDs are read at), networking.istio.io/v1alpha3/<Kind>
// before. The resources are the same under both; a DiscoveryResponse
// carries the type URL the request named.
func (k Kind) TypeURLs() []string {
	return []string{"networking.istio.io/v1/" + string(k), "networking.istio.io/v1alpha3/" + string(k)}
}

// EmptyCollections are the other type URLs istiod asks every config source
// for at its start (MeshConfig and its Pilot schema, istio/istio
// pkg/adsc ConfigInitialRequests, as of the istio module tools/istiod
// pins): it counts the source as synced only once each was answered. The
// bridge serves them as collections that stay empty, so that they cost a
// stream nothing and none counts against the engine's bound on type URLs
// it does not serve, which newer istiods' added kinds would otherwise
// exhaust.
var EmptyCollections = []string{
	"core/v1alpha1/MeshConfig",
	"security.istio.io/v1/AuthorizationPolicy",
	"networking.istio.io/v1/DestinationRule",
	"networking.istio.io/v1alpha3/EnvoyFilter",
	"networking.istio.io/v1/Gateway",
	"security.istio.io/v1/PeerAuthentication",
	"networking.istio.io/v1beta1/ProxyConfig",
	"security.istio.io/v1/RequestAuthentication",
	"networking.istio.io/v1/Sidecar",
	"telemetry.istio.io/v1/Telemetry",
	"extensions.istio.io/v1alpha1/TrafficExtension",
	"networking.istio.io/v1/VirtualService",
	"extensions.istio.io/v1alpha1/WasmPlugin",
	"networking.istio.io/v1/WorkloadGroup",
}

// ResourceTypeURL is the type URL of every resource in an MCP
// DiscoveryResponse (each is an Any of an mcp Resource, whose body is the
// Istio message).
const ResourceTypeURL = "type.googleapis.com/istio.mcp.v1alpha1.Resource"

// Resource is one MCP resource.
type Resource struct {
	Kind Kind
	// Name is "namespace/name", the metadata name istiod splits into the
	// two; it is unique within the kind.
	Name string
	// Message holds that name, a version that is the content hash of the
	// rest, and the body: an Any of the ServiceEntry or WorkloadEntry. It
	// is immutable, and marshals to the same bytes every time under
	// deterministic marshalling.
	Message *mcpv1alpha1.Resource
}

// deterministic marshals maps in key order, so that equal messages have
// equal bytes (and versions).
var deterministic = proto.MarshalOptions{Deterministic: true}

// newResource wraps body as the MCP resource namespace/name. Its version
// is the hash of the resource marshalled without it: istiod replaces a
// stored resource only when the version differs (and always when it is
// empty), so a content version makes a resent, unchanged resource cost it
// nothing beyond decoding.
func newResource(kind Kind, namespace, name string, body proto.Message) (Resource, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, body, deterministic); err != nil {
		return Resource{}, fmt.Errorf("marshalling %s %s/%s: %w", kind, namespace, name, err)
	}
	full := namespace + "/" + name
	m := &mcpv1alpha1.Resource{Metadata: &mcpv1alpha1.Metadata{Name: full}, Body: a}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return Resource{}, fmt.Errorf("marshalling %s %s: %w", kind, full, err)
	}
	m.Metadata.Version = strconv.FormatUint(xxhash.Sum64(b), 16)
	return Resource{Kind: kind, Name: full, Message: m}, nil
}
