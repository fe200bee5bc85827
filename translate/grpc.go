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

// listenerSlab and routeSlab hold the messages of one listener or route
// configuration, so that each costs one allocation (plus the Any's bytes).
type listenerSlab struct {
	l     listenerv3.Listener
	api   listenerv3.ApiListener
	typed anypb.Any
	hcm   hcmv3.HttpConnectionManager
	rds   hcmv3.HttpConnectionManager_Rds
	rdsv  hcmv3.Rds
}

type routeSlab struct {
	rc      routev3.RouteConfiguration
	vhs     [1]*routev3.VirtualHost
	vh      routev3.VirtualHost
	routes  [1]*routev3.Route
	r       routev3.Route
	action  routev3.Route_Route
	ra      routev3.RouteAction
	cluster routev3.RouteAction_Cluster
}

// matchAll and anyDomain are shared by every route configuration: never
// modify them.
var (
	matchAll  = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}}
	anyDomain = []string{"*"}
)

// Listener builds the API listener a proxyless gRPC client resolves for
// xds:///name: an HttpConnectionManager taking route configuration name over
// ADS (RDS), with the router as its only filter. This is the minimal chain
// that both grpc-go and grpc-js accept: an api_listener named exactly as the
// target, whose HttpConnectionManager names its route configuration, with
// the router as the only HTTP filter. Envoys must never receive it.
func Listener(name string) (*listenerv3.Listener, error) {
	s := &listenerSlab{}
	s.rdsv.ConfigSource = adsSource
	s.rdsv.RouteConfigName = name
	s.rds.Rds = &s.rdsv
	s.hcm.StatPrefix = name
	s.hcm.RouteSpecifier = &s.rds
	s.hcm.HttpFilters = httpFilters[:1:1]
	// The listener's own validation stops at the Any, so check the HCM here.
	if err := s.hcm.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validating http connection manager: %w", err)
	}
	if err := anypb.MarshalFrom(&s.typed, &s.hcm, deterministic); err != nil {
		return nil, fmt.Errorf("packing http connection manager: %w", err)
	}
	s.api.ApiListener = &s.typed
	s.l.Name = name
	s.l.ApiListener = &s.api
	return &s.l, nil
}

// Route builds the route configuration name with one virtual host matching
// every authority and one route sending every request to cluster name.
func Route(name string) *routev3.RouteConfiguration {
	s := &routeSlab{}
	s.cluster.Cluster = name
	s.ra.ClusterSpecifier = &s.cluster
	s.action.Route = &s.ra
	s.r.Match = matchAll
	s.r.Action = &s.action
	s.routes[0] = &s.r
	s.vh.Name = name
	s.vh.Domains = anyDomain[:1:1]
	s.vh.Routes = s.routes[:]
	s.vhs[0] = &s.vh
	s.rc.Name = name
	s.rc.VirtualHosts = s.vhs[:]
	return &s.rc
}
