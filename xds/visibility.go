package xds

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

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
// applies to a stream of that node. Only the node's user_agent_name decides
// (gRPC or not); a rule that scopes resources per node belongs here too.
func (r Resource) ForNode(n *corev3.Node) (proto.Message, bool) {
	return r.For(isGRPC(n))
}

// IsGRPC reports whether a node identifies as a proxyless gRPC client, the
// rule the streams use to decide whether to serve gRPC-only resources.
func IsGRPC(n *corev3.Node) bool { return isGRPC(n) }

func isGRPC(n *corev3.Node) bool {
	return strings.Contains(strings.ToLower(n.GetUserAgentName()), "grpc")
}

// visible hides gRPC-only resources from clients that are not gRPC, gives
// gRPC clients the gRPC variant where there is one (as Resource.For), and
// gives a client that is not on ADS the entry as its Rewrite rewrites it.
func (c *client) visible(e *entry) *entry { return shape(e, c.grpc, c.rewrite) }

// shape is e as a client sees it, nil if hidden: gRPC-only resources only
// for gRPC clients, which get the gRPC shape of a resource when it has one,
// and rewritten by the client's Rewrite. The streams and the views share
// this rule.
func shape(e *entry, grpc bool, rw *Rewrite) *entry {
	switch {
	case e == nil:
		return nil
	case e.grpcOnly && !grpc:
		return nil
	case grpc && e.grpc != nil:
		e = e.grpc
	}
	return rw.of(e)
}
