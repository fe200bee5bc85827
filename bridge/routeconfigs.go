package bridge

import (
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// routeConfigs builds the route configurations of the route rules from
// the route claims of the services served. It keeps each service's
// claims and rebuilds a route configuration only when a claim in it
// changed (flush). A claim the bridge cannot serve (dropped) and a claim
// that loses its host and path to another service's (a conflict) are
// each logged once while they last, and counted in
// xdsbridge_route_claims_dropped and xdsbridge_route_conflicts; after each
// rebuild, why holds what /debug/why?route= reads.
//
// It belongs to the edge and runs under the publisher's lock.
type routeConfigs struct {
	log   *slog.Logger
	rules *translate.Routes

	claims    map[string][]translate.Claim        // by service
	dropped   map[string][]translate.DroppedClaim // by service
	dirty     map[string]bool                     // route configurations whose claims changed
	conflicts map[string][]translate.Conflict     // by route configuration
	built     map[string]*routev3.RouteConfiguration
	// logged are the dropped claims and conflicts already logged, so that
	// each is logged once while it lasts.
	logged map[string]bool
	// peaks are the most entries the maps keyed by service held
	// (reclaim.Map): a registry that shrank gives their memory back.
	peaks struct{ claims, dropped, logged int }

	why *atomic.Pointer[routeWhy]
	m   routeMetrics
}

type routeMetrics struct {
	conflicts, dropped prometheus.Gauge
}

func newRouteConfigs(log *slog.Logger, why *atomic.Pointer[routeWhy], reg prometheus.Registerer) *routeConfigs {
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(g)
		return g
	}
	return &routeConfigs{log: log, why: why,
		m: routeMetrics{
			conflicts: gauge("xdsbridge_route_conflicts",
				"Route claims not served because another service holds the same host and path (see /debug/why?route=HOST/PATH)."),
			dropped: gauge("xdsbridge_route_claims_dropped",
				"Route tags and metadata entries that state a route the bridge cannot serve (a bad host or path, an unserved option)."),
		},
		claims: map[string][]translate.Claim{}, dropped: map[string][]translate.DroppedClaim{},
		dirty: map[string]bool{}, conflicts: map[string][]translate.Conflict{}, built: map[string]*routev3.RouteConfiguration{},
		logged: map[string]bool{},
	}
}

// configure sets the route rules; every route configuration they name is
// rebuilt at the next flush.
func (r *routeConfigs) configure(rules *translate.Routes) {
	r.rules = rules
	for _, name := range rules.Configs() {
		r.dirty[name] = true
	}
}

// service records the route claims of svc, served.
func (r *routeConfigs) service(svc sources.Service) {
	claims, dropped := r.rules.Claims(svc)
	old := r.claims[svc.Name]
	if !slices.Equal(old, claims) {
		for _, c := range old {
			r.dirty[c.Config] = true
		}
		for _, c := range claims {
			r.dirty[c.Config] = true
		}
		setOrDelete(r.claims, svc.Name, claims)
	}
	if !slices.Equal(r.dropped[svc.Name], dropped) {
		r.noteDropped(svc.Name, dropped)
	}
}

// remove forgets the claims of the service name.
func (r *routeConfigs) remove(name string) {
	for _, c := range r.claims[name] {
		r.dirty[c.Config] = true
	}
	delete(r.claims, name)
	if len(r.dropped[name]) > 0 {
		r.noteDropped(name, nil)
	}
}

// noteDropped records the dropped claims of a service, logging each new
// one once.
func (r *routeConfigs) noteDropped(name string, dropped []translate.DroppedClaim) {
	for _, d := range dropped {
		if k := "drop\x00" + d.Service + "\x00" + d.Origin; !r.logged[k] {
			r.logged[k] = true
			r.log.Warn("not serving a route a service states: it cannot be served", "service", d.Service, "from", d.Origin, "reason", d.Reason)
		}
	}
	for _, d := range r.dropped[name] {
		if !slices.ContainsFunc(dropped, func(x translate.DroppedClaim) bool { return x.Origin == d.Origin }) {
			delete(r.logged, "drop\x00"+d.Service+"\x00"+d.Origin)
		}
	}
	setOrDelete(r.dropped, name, dropped)
	n := 0
	for _, ds := range r.dropped {
		n += len(ds)
	}
	r.m.dropped.Set(float64(n))
}

// flush rebuilds the route configurations whose claims changed, and
// reports whether there were any. A route configuration that cannot be
// built keeps its last good version; one the rules no longer name is
// dropped.
func (r *routeConfigs) flush() bool {
	if len(r.dirty) == 0 {
		return false
	}
	var all []translate.Claim
	for _, svc := range slices.Sorted(maps.Keys(r.claims)) {
		all = append(all, r.claims[svc]...)
	}
	for _, name := range slices.Sorted(maps.Keys(r.dirty)) {
		rc, conflicts, err := r.rules.RouteConfiguration(name, all)
		if err != nil {
			r.log.Error("cannot build a route configuration; keeping its last good version", "route_config", name, "err", err)
			continue
		}
		r.built[name] = rc
		r.noteConflicts(name, conflicts)
	}
	clear(r.dirty)
	for name := range r.built {
		if !slices.Contains(r.rules.Configs(), name) {
			delete(r.built, name)
			r.noteConflicts(name, nil)
		}
	}
	r.why.Store(&routeWhy{configs: maps.Clone(r.built), conflicts: maps.Clone(r.conflicts), claims: all})
	return true
}

// noteConflicts records the conflicts of a route configuration, logging
// each new one once.
func (r *routeConfigs) noteConflicts(name string, conflicts []translate.Conflict) {
	keep := map[string]bool{}
	for _, c := range conflicts {
		k := "conflict\x00" + name + "\x00" + c.Host + c.Path
		keep[k] = true
		if !r.logged[k] {
			r.logged[k] = true
			var losers []string
			for _, l := range c.Losers {
				losers = append(losers, l.Service)
			}
			r.log.Warn("services claim the same route; serving one", "route_config", name, "host", c.Host, "path", c.Path,
				"served", c.Winner.Service, "not_served", losers)
		}
	}
	for _, c := range r.conflicts[name] {
		if k := "conflict\x00" + name + "\x00" + c.Host + c.Path; !keep[k] {
			delete(r.logged, k)
		}
	}
	setOrDelete(r.conflicts, name, conflicts)
	n := 0
	for _, cs := range r.conflicts {
		for _, c := range cs {
			n += len(c.Losers)
		}
	}
	r.m.conflicts.Set(float64(n))
}

// reclaim makes the maps keyed by service again once they shrank well
// below their peak (reclaim.Map).
func (r *routeConfigs) reclaim() {
	r.claims = reclaim.Map(r.claims, &r.peaks.claims)
	r.dropped = reclaim.Map(r.dropped, &r.peaks.dropped)
	r.logged = reclaim.Map(r.logged, &r.peaks.logged)
}

// setOrDelete sets m[k] to vs, or deletes k when vs is empty: the maps
// keyed by service or route configuration hold only what has entries.
func setOrDelete[V any](m map[string][]V, k string, vs []V) {
	if len(vs) == 0 {
		delete(m, k)
		return
	}
	m[k] = vs
}
