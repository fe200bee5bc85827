// Package translate turns the normalized model into Envoy resources. Every
// function here is pure and deterministic: the same service always yields
// byte-identical resources (under deterministic marshalling), whatever the
// order of its endpoints.
//
// Resources returned here are immutable: to save allocations on the hot
// path (Service runs for every change of every service), they share
// sub-messages that are identical everywhere, such as the ADS config source
// and the router filter, with each other and with every other call's result.
// Reading and marshalling them concurrently is safe; a caller that wants to
// modify one must proto.Clone it first.
package translate

import (
	"errors"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// DefaultConnectTimeout is the cluster connect timeout when
// Options.ConnectTimeout is zero.
const DefaultConnectTimeout = 5 * time.Second

// Options select what Service builds. The zero value is valid.
type Options struct {
	// GRPC adds the proxyless gRPC chain: a Listener named after the service
	// with an ApiListener, and its RouteConfiguration.
	GRPC bool
	// ConnectTimeout is the clusters' connect timeout; zero means
	// DefaultConnectTimeout. It must be positive otherwise.
	ConnectTimeout time.Duration
	// Shaping rules refine each cluster (see Shaping); nil shapes nothing.
	Shaping *Shaping
}

// Resources are the Envoy resources of one service. Listener and Route are
// nil unless Options.GRPC is set. They are immutable (see the package doc).
type Resources struct {
	Cluster *clusterv3.Cluster
	// GRPCCluster is the cluster gRPC clients get when shaping rules
	// limited to one client class make it differ from Cluster; nil
	// otherwise.
	GRPCCluster *clusterv3.Cluster
	Assignment  *endpointv3.ClusterLoadAssignment
	Listener    *listenerv3.Listener
	Route       *routev3.RouteConfiguration
}

// Service builds the resources of svc and validates each (ValidateAll). svc
// is not modified. Endpoints whose address and port repeat one already
// emitted are left out (gRPC rejects a whole assignment over one duplicate);
// the copy kept is the one Envoy would prefer (lowest priority first).
//
// An error means svc cannot be served as it is (an empty name, a non-IP
// address, weights summing beyond uint32, a resource failing validation);
// the caller should keep serving the service's last good resources.
func Service(svc sources.Service, opts Options) (Resources, error) {
	r, err := build(svc, opts)
	if err == nil {
		err = r.validate()
	}
	if err != nil {
		return Resources{}, fmt.Errorf("translating service %q: %w", svc.Name, err)
	}
	return r, nil
}

func build(svc sources.Service, opts Options) (Resources, error) {
	if svc.Name == "" {
		return Resources{}, errors.New("empty name")
	}
	var r Resources
	var err error
	// Locality weighting first, so that a shaping rule may still override
	// common_lb_config.
	c := Cluster(svc.Name, opts.ConnectTimeout)
	withLocalityWeights(c, svc)
	r.Cluster, r.GRPCCluster = shape(c, svc, opts.Shaping)
	if r.Assignment, err = Assignment(svc); err != nil {
		return Resources{}, err
	}
	if opts.GRPC {
		if r.Listener, err = Listener(svc.Name); err != nil {
			return Resources{}, err
		}
		r.Route = Route(svc.Name)
	}
	return r, nil
}

// validate runs ValidateAll on every resource present.
func (r Resources) validate() error {
	if err := r.Cluster.ValidateAll(); err != nil {
		return fmt.Errorf("validating cluster: %w", err)
	}
	if r.GRPCCluster != nil {
		if err := r.GRPCCluster.ValidateAll(); err != nil {
			return fmt.Errorf("validating the gRPC clients' cluster: %w", err)
		}
	}
	if err := validateAssignment(r.Assignment); err != nil {
		return fmt.Errorf("validating assignment: %w", err)
	}
	if r.Listener != nil {
		if err := r.Listener.ValidateAll(); err != nil {
			return fmt.Errorf("validating listener: %w", err)
		}
	}
	if r.Route != nil {
		if err := r.Route.ValidateAll(); err != nil {
			return fmt.Errorf("validating route: %w", err)
		}
	}
	return nil
}
