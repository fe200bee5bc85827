package translate

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// RouterFilter is the name of Envoy's router HTTP filter, the only filter
// the proxyless chain carries (gRPC requires a terminal filter last).
const RouterFilter = "envoy.filters.http.router"

// httpFilters is the HCM filter chain: the router alone. It is identical for
// every listener, so it is built (and its Any marshalled) once per process
// and shared: never modify it.
var httpFilters = []*hcmv3.HttpFilter{{
	Name:       RouterFilter,
	ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
}}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("packing %T: %v", m, err))
	}
	return a
}

// deterministic marshals Any payloads so that equal resources have equal
// bytes, and hence equal content-hash versions.
var deterministic = proto.MarshalOptions{Deterministic: true}

// Listener builds the API listener a proxyless gRPC client resolves for
// xds:///name: an HttpConnectionManager taking route configuration name over
// ADS (RDS), with the router as its only filter. This is the minimal chain
// grpc-go and grpc-js accept (see shared/XDS.md, "Client constraints").
// Envoys must never receive it.
func Listener(name string) (*listenerv3.Listener, error) {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource,
			RouteConfigName: name,
		}},
		HttpFilters: httpFilters[:1:1],
	}
	// The listener's own validation stops at the Any, so check the HCM here.
	if err := hcm.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validating http connection manager: %w", err)
	}
	typed := &anypb.Any{}
	if err := anypb.MarshalFrom(typed, hcm, deterministic); err != nil {
		return nil, fmt.Errorf("packing http connection manager: %w", err)
	}
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: typed},
	}, nil
}

// Route builds the route configuration name with one virtual host matching
// every authority and one route sending every request to cluster name.
func Route(name string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
				}},
			}},
		}},
	}
}
