// Package translate turns the normalized model into Envoy resources. Every
// function here is pure and deterministic: the same service always yields
// byte-identical resources.
package translate

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Options select what Service builds.
type Options struct {
	// GRPC adds the proxyless gRPC chain: a Listener named after the service
	// with an ApiListener, and its RouteConfiguration.
	GRPC bool
}

// Resources are the Envoy resources of one service. Listener and Route are
// nil unless Options.GRPC is set.
type Resources struct {
	Cluster    *clusterv3.Cluster
	Assignment *endpointv3.ClusterLoadAssignment
	Listener   *listenerv3.Listener
	Route      *routev3.RouteConfiguration
}

// Service builds the resources of svc and validates each (ValidateAll).
func Service(svc sources.Service, opts Options) (Resources, error) {
	panic("not implemented")
}
