package bridge

import (
	"maps"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsbridge/xdsbridge/translate"
)

// routeWhy is what /debug/why?route= reads: the route configurations as
// built, their conflicts and every claim, immutable once stored.
type routeWhy struct {
	configs   map[string]*routev3.RouteConfiguration
	conflicts map[string][]translate.Conflict
	claims    []translate.Claim
}

// WhyRoute is the answer of /debug/why?route=HOST/PATH, per route
// configuration the rules build.
type WhyRoute struct {
	RouteConfig string `json:"route_config"`
	// VirtualHost and Prefix are the virtual host and the route Envoy
	// takes for the request (empty when none matches), Cluster where it
	// goes.
	VirtualHost string `json:"virtual_host,omitempty"`
	Prefix      string `json:"prefix,omitempty"`
	Cluster     string `json:"cluster,omitempty"`
	// Claim is what put that route there; NotServed are the claims of
	// other services for the same host and path that lost to it.
	Claim     *WhyClaim  `json:"claim,omitempty"`
	NotServed []WhyClaim `json:"not_served,omitempty"`
}

// WhyClaim is one service's claim of a route.
type WhyClaim struct {
	Service string `json:"service"`
	Host    string `json:"host"`
	Path    string `json:"path"`
	// From is the rule's host template or the tag or metadata entry.
	From  string `json:"from"`
	Strip string `json:"strip,omitempty"`
}

func whyClaim(c translate.Claim) WhyClaim {
	return WhyClaim{Service: c.Service, Host: c.Host, Path: c.Path, From: c.Origin, Strip: c.Strip}
}

// explain answers /debug/why?route=host/path.
func (w *routeWhy) explain(host, path string) []WhyRoute {
	out := []WhyRoute{}
	if w == nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(w.configs)) {
		ans := WhyRoute{RouteConfig: name}
		vh, r := translate.SelectRoute(w.configs[name], host, path)
		if r != nil {
			ans.VirtualHost, ans.Prefix, ans.Cluster = vh.GetName(), r.GetMatch().GetPrefix(), r.GetRoute().GetCluster()
			domain := vh.GetDomains()[0]
			for _, c := range w.claims {
				if c.Config == name && c.Service == ans.Cluster && c.Path == ans.Prefix && (c.Host == domain || c.Host == "*") {
					wc := whyClaim(c)
					ans.Claim = &wc
					break
				}
			}
			for _, c := range w.conflicts[name] {
				if c.Path == ans.Prefix && (c.Host == domain || c.Host == "*") && c.Winner.Service == ans.Cluster {
					for _, l := range c.Losers {
						ans.NotServed = append(ans.NotServed, whyClaim(l))
					}
				}
			}
		}
		out = append(out, ans)
	}
	return out
}
