package xds

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// Resource is one named resource of one type (a v3 type URL such as
// resource.ClusterType).
type Resource struct {
	Type    string
	Name    string
	Message proto.Message
	// GRPCOnly resources (the proxyless listener/route chain) are served
	// only to clients whose node identifies as gRPC (user_agent_name).
	GRPCOnly bool
	// GRPC, if set, is the variant of Message served to gRPC clients (a
	// cluster without the settings proxyless gRPC rejects). It has the same
	// type and name, its own content-hash version, and is marshalled once
	// per version like Message.
	GRPC proto.Message
	// Scopes are the scopes whose clients a wildcard subscription delivers
	// the resource to, besides the unscoped clients, which get every
	// resource; Denied are the scopes whose clients never get it, not even
	// by name (see "Scopes" in doc.go).
	Scopes, Denied ScopeSet
	// Private resources (secrets) are served only to the clients of the
	// scopes in Scopes and not in Denied, whether they ask by name or by
	// wildcard; never to an unscoped client, and never through a view
	// (REST, files). Dumps redact their sensitive fields.
	Private bool
}

// Key names a resource to remove.
type Key struct {
	Type string
	Name string
}

// For returns the message a client of that class receives, and false if
// the resource is hidden from it. It is the rule the engine applies to
// every client, for callers that show what a client would get.
func (r Resource) For(grpc bool) (proto.Message, bool) {
	switch {
	case r.GRPCOnly && !grpc:
		return nil, false
	case grpc && r.GRPC != nil:
		return r.GRPC, true
	}
	return r.Message, true
}

// ForNode is For for the client class of node n: the rule the engine
// applies to a stream of that node by its user_agent_name (gRPC or not).
// A node's scope is applied by the caller (see Server.SetScopes).
func (r Resource) ForNode(n *corev3.Node) (proto.Message, bool) {
	return r.For(isGRPC(n))
}

// InScope reports whether a wildcard subscription of a client of scope id
// (0: unscoped) delivers r: the rule the engine applies (see Scoper). A
// private resource goes only to its scopes, by wildcard or by name.
func (r Resource) InScope(id int) bool {
	return (id == 0 && !r.Private) || r.Scopes.Has(id) && !r.Denied.Has(id)
}

// IsGRPC reports whether a node identifies as a proxyless gRPC client, the
// rule the streams use to decide whether to serve gRPC-only resources.
func IsGRPC(n *corev3.Node) bool { return isGRPC(n) }

func isGRPC(n *corev3.Node) bool {
	return strings.Contains(strings.ToLower(n.GetUserAgentName()), "grpc")
}
