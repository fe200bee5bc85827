package xds

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	// The types a per-type client's rewrite opens inside a listener
	// (rewrite.go): Any.UnmarshalNew finds them in the global registry.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/mem"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// entry is one version of one resource. It is built once per version and
// shared read-only by every client: the marshalled Any and the encoded
// records (wire.Record) are never mutated after newEntry returns, so concurrent
// sends only read them.
type entry struct {
	typ      string // the type URL it is served under (its store's)
	name     string
	version  string // hex of xxhash64 over the deterministic marshal
	any      *anypb.Any
	wire     wire.Record
	size     int
	grpcOnly bool
	// edsName is, for an EDS cluster, the assignment it warms with; a change
	// of the cluster re-sends that assignment.
	edsName string
	// refs are the clusters a route configuration or listener sends
	// traffic to (refs.go), for the make-before-break gate.
	refs []string
	// grpc is the variant served to gRPC clients, nil when they get this
	// entry itself (see Resource.GRPC).
	grpc *entry
	// rewritten holds the entry rewritten for non-ADS clients (rewrite.go).
	rewritten rewriteCache
	// scopes, denied and private are the resource's (Resource.Scopes,
	// .Denied, .Private), set on the entry of the store only: a client's
	// shape of it (its gRPC variant, a rewrite) is looked at after the
	// scope (shape.go, watch.visible).
	scopes, denied ScopeSet
	private        bool
}

// contentVersion is the version of a resource marshalled deterministically:
// the hex of its xxhash64, the same in every replica and after a restart.
func contentVersion(b []byte) string { return strconv.FormatUint(xxhash.Sum64(b), 16) }

// Version returns the version the server gives m as a resource, for callers
// that show resources without serving them (a dry run).
func Version(m proto.Message) (string, error) {
	b, err := wire.Deterministic.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("marshalling %s: %w", proto.MessageName(m), err)
	}
	return contentVersion(b), nil
}

// stale stands for "the client holds some version we do not have" (a delta
// initial_resource_versions entry that does not match): it equals no entry.
var stale = &entry{}

func newEntry(r Resource) (*entry, error) {
	if r.Message == nil {
		return nil, fmt.Errorf("building %s %q: nil message", r.Type, r.Name)
	}
	// A message type must carry its own message; a collection carries any,
	// each resource an Any of the message's own type.
	got := messagePrefix + string(proto.MessageName(r.Message))
	if got != r.Type && strings.HasPrefix(r.Type, messagePrefix) {
		return nil, fmt.Errorf("building %s %q: message is a %s", r.Type, r.Name, got)
	}
	b, err := wire.Deterministic.Marshal(r.Message)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s %q: %w", r.Type, r.Name, err)
	}
	v := contentVersion(b)
	w, a := wire.EncodeRecord(got, r.Name, v, b)
	e := &entry{
		typ:      r.Type,
		name:     r.Name,
		version:  v,
		any:      a,
		wire:     w,
		size:     len(b),
		grpcOnly: r.GRPCOnly,
		scopes:   r.Scopes,
		denied:   r.Denied,
		private:  r.Private,
	}
	if c, ok := r.Message.(*clusterv3.Cluster); ok && c.GetType() == clusterv3.Cluster_EDS {
		e.edsName = c.GetEdsClusterConfig().GetServiceName()
		if e.edsName == "" {
			e.edsName = c.GetName()
		}
	}
	if r.Type == RouteType || r.Type == ListenerType {
		e.refs = clusterRefs(r.Message)
	}
	if r.GRPC != nil {
		if e.grpc, err = newEntry(Resource{Type: r.Type, Name: r.Name, Message: r.GRPC}); err != nil {
			return nil, fmt.Errorf("gRPC variant: %w", err)
		}
	}
	return e, nil
}

// emptyAssignment is what a SotW EDS client gets for a name still unknown
// after Options.UnknownNameWait: Envoy finishes warming the cluster on it
// (with no endpoints) instead of waiting for initial_fetch_timeout.
func emptyAssignment(name string) *entry {
	e, err := newEntry(Resource{Type: EndpointType, Name: name, Message: &endpointv3.ClusterLoadAssignment{ClusterName: name}})
	if err != nil {
		panic(err) // cannot happen: a fixed, valid message
	}
	return e
}

// same reports whether a client holding h already has e.
func same(h, e *entry) bool {
	return h == e || (h != nil && e != nil && h.version == e.version && h.name == e.name)
}

// sameContent reports whether entries a and b (either nil: none) serve the
// same resource to every client that gets both, whatever their scopes.
func sameContent(a, b *entry) bool {
	return a != nil && b != nil && a.version == b.version && a.grpcOnly == b.grpcOnly && same(a.grpc, b.grpc)
}

// record is the entry's delta Resource record or SotW resources record.
func (e *entry) record(delta bool) mem.Buffer {
	if delta {
		return e.wire.Delta
	}
	return e.wire.SotW
}

// recLen is the size of e's record in a response of the given protocol.
func (e *entry) recLen(delta bool) int { return len(e.record(delta).ReadOnlyData()) }

// inScope reports whether a wildcard of scope id delivers e: every entry
// but the private ones for the unscoped, else those in the scope and not
// denied to it.
func (e *entry) inScope(id int) bool {
	return (id == 0 && !e.private) || e.scopes.Has(id) && !e.denied.Has(id)
}

// reaches reports whether e (nil: none) is in scope id.
func (e *entry) reaches(id int) bool { return e != nil && e.scopes.Has(id) }

// rewriteCache holds an entry as each Rewrite rewrote it, keyed by Rewrite.
// A resource without ADS config sources maps to the entry itself.
type rewriteCache struct {
	mu sync.Mutex
	m  map[*Rewrite]*entry
}
