package xds

import (
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
)

// clusterRefs are the clusters a resource sends traffic to, sorted, each
// once: those of a route configuration's routes, and those of a
// listener's TCP proxies and inline route configurations. Other types
// name none. The make-before-break gate (gate.go) defers such a resource
// back from a client until the client has those clusters ready. A gRPC
// API listener names only its route configuration, which gRPC fetches
// before the clusters, and so names no cluster here.
func clusterRefs(m proto.Message) []string {
	var out []string
	switch m := m.(type) {
	case *routev3.RouteConfiguration:
		out = routeClusters(m, out)
	case *listenerv3.Listener:
		if m.GetApiListener() != nil {
			return nil
		}
		chains := m.GetFilterChains()
		if d := m.GetDefaultFilterChain(); d != nil {
			chains = append(slices.Clip(chains), d)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				a := f.GetTypedConfig()
				tp, hcm := &tcpproxyv3.TcpProxy{}, &hcmv3.HttpConnectionManager{}
				switch {
				case a == nil:
				case a.MessageIs(tp) && a.UnmarshalTo(tp) == nil:
					if c := tp.GetCluster(); c != "" {
						out = append(out, c)
					}
					for _, wc := range tp.GetWeightedClusters().GetClusters() {
						out = append(out, wc.GetName())
					}
				case a.MessageIs(hcm) && a.UnmarshalTo(hcm) == nil:
					out = routeClusters(hcm.GetRouteConfig(), out)
				}
			}
		}
	default:
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// routeClusters appends the clusters of rc's routes to out.
func routeClusters(rc *routev3.RouteConfiguration, out []string) []string {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			ra := r.GetRoute()
			if c := ra.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, wc := range ra.GetWeightedClusters().GetClusters() {
				out = append(out, wc.GetName())
			}
		}
	}
	return out
}
