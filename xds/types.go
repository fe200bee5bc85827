package xds

import (
	"strings"
)

// The v3 type URLs the engine orders and treats specially. Any other type is
// served too, after these five, with EDS-like (only-changed) SotW semantics,
// unless it is one of Options.Collections.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// rank is the make-before-break push order of upserts on ADS (see doc.go):
// clusters, then their endpoints, then secrets (which listeners and
// clusters name), then listeners, then routes, then anything else
// (rankOther).
func rank(typeURL string) int {
	switch typeURL {
	case ClusterType:
		return 0
	case EndpointType:
		return 1
	case SecretType:
		return 2
	case ListenerType:
		return 3
	case RouteType:
		return 4
	}
	return rankOther
}

const rankOther = 5

// breakRank is the order of removals: what refers to a resource goes before
// it, so a listener goes before its route, the route before its cluster,
// the cluster before its assignment, and a secret after the listeners and
// clusters that name it.
func breakRank(typeURL string) int {
	switch typeURL {
	case ListenerType:
		return 0
	case RouteType:
		return 1
	case ClusterType:
		return 2
	case EndpointType:
		return 3
	case SecretType:
		return 4
	}
	return rankOther
}

// fullState reports whether SotW responses of the type must carry every
// subscribed resource, because an absent one is read as deleted (the
// collections of Options.Collections too; NewServer marks them).
func fullState(typeURL string) bool { return typeURL == ClusterType || typeURL == ListenerType }

// messagePrefix starts the type URL of a protobuf message. A type without
// it is a collection name, such as MCP's networking.istio.io/v1/ServiceEntry,
// whose resources are Anys of their own message type.
const messagePrefix = "type.googleapis.com/"

// shortType is the metric label of a type URL: a message's last name
// element, a collection's last path element (ServiceEntry).
func shortType(typeURL string) string {
	if !strings.HasPrefix(typeURL, messagePrefix) {
		return typeURL[strings.LastIndexByte(typeURL, '/')+1:]
	}
	switch typeURL {
	case ClusterType:
		return "cluster"
	case EndpointType:
		return "endpoint"
	case ListenerType:
		return "listener"
	case RouteType:
		return "route"
	case SecretType:
		return "secret"
	}
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

// indexed reports whether the store keeps the index of names that
// writers read (named).
func indexed(typeURL string) bool { return typeURL == ClusterType || typeURL == EndpointType }

// rewritable reports whether resources of a type can name config sources:
// a cluster its EDS and its transport socket's SDS, a listener its
// connection managers' RDS and its TLS contexts' SDS.
func rewritable(typeURL string) bool { return typeURL == ClusterType || typeURL == ListenerType }
