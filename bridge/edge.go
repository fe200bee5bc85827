package bridge

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/static"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// edge keeps the resources of an Envoy's listener side: the route
// configurations built from the services' route claims, the configured
// listeners, and the secrets and raw resources read from files. It also
// decides what is served where their names meet the services' own:
//   - a listener or route configuration named like a service's proxyless
//     gRPC chain is served to Envoys, and the chain to gRPC clients, as one
//     resource with a gRPC variant;
//   - a raw cluster named like a service is not served while the service
//     is (the registry's live endpoints win over a static copy); it is
//     counted in xdsbridge_shadowed_resources.
//
// It belongs to the publisher and runs under its lock.
type edge struct {
	log    *slog.Logger
	routes *translate.Routes
	// listeners are the configured listeners; files the secrets and raw
	// resources as last read.
	listeners []config.Listener
	files     static.State
	scopes    *translate.Scopes
	// chain rebuilds the proxyless gRPC listener and route configuration
	// of a served service (nil when gRPC is off or the service is not
	// served).
	chain func(name string) (listener, route *xds.Resource)

	claims    map[string][]translate.Claim // by service
	dropped   map[string][]translate.DroppedClaim
	dirty     map[string]bool // route configurations whose claims changed
	conflicts map[string][]translate.Conflict
	built     map[string]*routev3.RouteConfiguration
	// own are the listener side's resources by key, as last applied
	// before merging with the services' (see merged); services the names
	// of the services served.
	own      map[xds.Key]xds.Resource
	services map[string]bool
	// logged are the dropped claims and conflicts already logged, so that
	// each is logged once while it lasts.
	logged map[string]bool
	// peaks are the most entries the maps keyed by service held
	// (reclaim.Map): a registry that shrank gives their memory back.
	peaks struct{ services, claims, dropped, logged int }
	// ups and rems are the changes not yet taken (see take).
	ups  []xds.Resource
	rems []xds.Key

	why *atomic.Pointer[routeWhy]
	m   edgeMetrics
}

type edgeMetrics struct {
	conflicts, dropped, shadowed prometheus.Gauge
	denied                       prometheus.Counter
}

func newEdgeMetrics(reg prometheus.Registerer) edgeMetrics {
	m := edgeMetrics{
		conflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xdsbridge_route_conflicts",
			Help: "Route claims not served because another service holds the same host and path (see /debug/why?route=HOST/PATH).",
		}),
		dropped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xdsbridge_route_claims_dropped",
			Help: "Route tags and metadata entries that state a route the bridge cannot serve (a bad host or path, an unserved option).",
		}),
		shadowed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xdsbridge_shadowed_resources",
			Help: "Raw clusters from resource files not served because a registry service has the same name.",
		}),
		denied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xdsbridge_secrets_denied_total",
			Help: "Subscriptions to a secret by a node whose scope is not granted it; the node is answered as if it did not exist.",
		}),
	}
	reg.MustRegister(m.conflicts, m.dropped, m.shadowed, m.denied)
	return m
}

func newEdge(log *slog.Logger, why *atomic.Pointer[routeWhy], m edgeMetrics) *edge {
	return &edge{log: log, why: why, m: m,
		claims: map[string][]translate.Claim{}, dropped: map[string][]translate.DroppedClaim{},
		dirty: map[string]bool{}, conflicts: map[string][]translate.Conflict{}, built: map[string]*routev3.RouteConfiguration{},
		own: map[xds.Key]xds.Resource{}, services: map[string]bool{}, logged: map[string]bool{},
	}
}

// configure sets the route rules and listeners of a configuration; every
// route configuration is rebuilt at the next flush.
func (g *edge) configure(routes *translate.Routes, listeners []config.Listener) {
	g.routes, g.listeners = routes, listeners
	for _, name := range routes.Configs() {
		g.dirty[name] = true
	}
	g.sync()
}

// service records the route claims of svc, served.
func (g *edge) service(svc sources.Service) {
	g.services[svc.Name] = true
	claims, dropped := g.routes.Claims(svc)
	old := g.claims[svc.Name]
	if !slices.Equal(old, claims) {
		for _, c := range old {
			g.dirty[c.Config] = true
		}
		for _, c := range claims {
			g.dirty[c.Config] = true
		}
		g.setClaims(svc.Name, claims)
	}
	if !slices.Equal(g.dropped[svc.Name], dropped) {
		g.noteDropped(svc.Name, dropped)
	}
}

// remove forgets the service name.
func (g *edge) remove(name string) {
	delete(g.services, name)
	for _, c := range g.claims[name] {
		g.dirty[c.Config] = true
	}
	g.setClaims(name, nil)
	if len(g.dropped[name]) > 0 {
		g.noteDropped(name, nil)
	}
}

func (g *edge) setClaims(name string, claims []translate.Claim) {
	if len(claims) == 0 {
		delete(g.claims, name)
		return
	}
	g.claims[name] = claims
}

// noteDropped records the dropped claims of a service, logging each new
// one once.
func (g *edge) noteDropped(name string, dropped []translate.DroppedClaim) {
	for _, d := range dropped {
		if k := "drop\x00" + d.Service + "\x00" + d.Origin; !g.logged[k] {
			g.logged[k] = true
			g.log.Warn("not serving a route a service states: it cannot be served", "service", d.Service, "from", d.Origin, "reason", d.Reason)
		}
	}
	for _, d := range g.dropped[name] {
		if !slices.ContainsFunc(dropped, func(x translate.DroppedClaim) bool { return x.Origin == d.Origin }) {
			delete(g.logged, "drop\x00"+d.Service+"\x00"+d.Origin)
		}
	}
	if len(dropped) == 0 {
		delete(g.dropped, name)
	} else {
		g.dropped[name] = dropped
	}
	n := 0
	for _, ds := range g.dropped {
		n += len(ds)
	}
	g.m.dropped.Set(float64(n))
}

// take returns the listener side's changes since the last take, after
// rebuilding the route configurations whose claims changed.
func (g *edge) take() ([]xds.Resource, []xds.Key) {
	g.flush()
	g.services = reclaim.Map(g.services, &g.peaks.services)
	g.claims = reclaim.Map(g.claims, &g.peaks.claims)
	g.dropped = reclaim.Map(g.dropped, &g.peaks.dropped)
	g.logged = reclaim.Map(g.logged, &g.peaks.logged)
	ups, rems := g.ups, g.rems
	g.ups, g.rems = nil, nil
	return ups, rems
}

// flush rebuilds the route configurations whose claims changed.
func (g *edge) flush() {
	if len(g.dirty) == 0 {
		return
	}
	var all []translate.Claim
	for _, svc := range slices.Sorted(maps.Keys(g.claims)) {
		all = append(all, g.claims[svc]...)
	}
	for _, name := range slices.Sorted(maps.Keys(g.dirty)) {
		rc, conflicts, err := g.routes.RouteConfiguration(name, all)
		if err != nil {
			g.log.Error("cannot build a route configuration; keeping its last good version", "route_config", name, "err", err)
			continue
		}
		g.built[name] = rc
		g.noteConflicts(name, conflicts)
	}
	clear(g.dirty)
	for name := range g.built {
		if !slices.Contains(g.routes.Configs(), name) {
			delete(g.built, name)
			g.noteConflicts(name, nil)
		}
	}
	g.why.Store(&routeWhy{configs: maps.Clone(g.built), conflicts: maps.Clone(g.conflicts), claims: all})
	g.sync()
}

// noteConflicts records the conflicts of a route configuration, logging
// each new one once.
func (g *edge) noteConflicts(name string, conflicts []translate.Conflict) {
	keep := map[string]bool{}
	for _, c := range conflicts {
		k := "conflict\x00" + name + "\x00" + c.Host + c.Path
		keep[k] = true
		if !g.logged[k] {
			g.logged[k] = true
			var losers []string
			for _, l := range c.Losers {
				losers = append(losers, l.Service)
			}
			g.log.Warn("services claim the same route; serving one", "route_config", name, "host", c.Host, "path", c.Path,
				"served", c.Winner.Service, "not_served", losers)
		}
	}
	for _, c := range g.conflicts[name] {
		if k := "conflict\x00" + name + "\x00" + c.Host + c.Path; !keep[k] {
			delete(g.logged, k)
		}
	}
	if len(conflicts) == 0 {
		delete(g.conflicts, name)
	} else {
		g.conflicts[name] = conflicts
	}
	n := 0
	for _, cs := range g.conflicts {
		for _, c := range cs {
			n += len(c.Losers)
		}
	}
	g.m.conflicts.Set(float64(n))
}

// setFiles takes a new state of the secrets and resource files.
func (g *edge) setFiles(st static.State) {
	g.files = st
	g.sync()
}

// setScopes takes new scoping rules: the listener side's resources get
// their new scopes.
func (g *edge) setScopes(s *translate.Scopes) {
	g.scopes = s
	g.sync()
}

// wanted is every resource of the listener side as it should be served
// now, before merging with the services'.
func (g *edge) wanted() map[xds.Key]xds.Resource {
	every := xds.ScopeSet(g.scopes.Every())
	out := map[xds.Key]xds.Resource{}
	add := func(typ, name string, m proto.Message, scopes xds.ScopeSet, private bool) {
		out[xds.Key{Type: typ, Name: name}] = xds.Resource{Type: typ, Name: name, Message: m, Scopes: scopes, Private: private}
	}
	for name, rc := range g.built {
		add(resource.RouteType, name, rc, every, false)
	}
	for _, l := range g.listeners {
		add(resource.ListenerType, l.Resource.GetName(), l.Resource, g.scopeSet(l.Scopes, every), false)
	}
	for _, s := range g.files.Secrets {
		private := len(s.Grant) > 0 || s.Resource.GetTlsCertificate() != nil
		scopes := every
		if private {
			scopes = g.scopeSet(s.Grant, 0)
		}
		add(resource.SecretType, s.Resource.GetName(), s.Resource, scopes, private)
	}
	for _, f := range g.files.Files {
		scopes := g.scopeSet(f.Scopes, every)
		for _, l := range f.Raw.Listeners {
			add(resource.ListenerType, l.GetName(), l, scopes, false)
		}
		for _, r := range f.Raw.Routes {
			add(resource.RouteType, r.GetName(), r, every, false)
		}
		for _, c := range f.Raw.Clusters {
			add(resource.ClusterType, c.GetName(), c, scopes, false)
		}
		for _, s := range f.Raw.Secrets {
			add(resource.SecretType, s.GetName(), s, g.scopeSet(f.Grant, 0), true)
		}
	}
	return out
}

// scopeSet is the engine's set of the scopes named, def when names is
// empty. A name no scope has (after a reload) adds nothing.
func (g *edge) scopeSet(names []string, def xds.ScopeSet) xds.ScopeSet {
	if len(names) == 0 {
		return def
	}
	var set xds.ScopeSet
	for _, n := range names {
		if id, ok := g.scopes.ID(n); ok {
			set = set.With(id)
		}
	}
	return set
}

// sync compares what the listener side wants served with what it applied
// and queues the difference, merged with the services' resources.
func (g *edge) sync() {
	want := g.wanted()
	for _, k := range sortedKeys(want) {
		r := want[k]
		if old, ok := g.own[k]; ok && sameResource(old, r) {
			continue
		}
		g.own[k] = r
		if out, ok := g.merged(k); ok {
			g.queue(k, &out)
		}
	}
	for _, k := range sortedKeys(g.own) {
		if _, ok := want[k]; ok {
			continue
		}
		delete(g.own, k)
		if out, ok := g.merged(k); ok {
			g.queue(k, &out) // a service's own resource takes the name back
		} else if !g.services[k.Name] || k.Type != resource.ClusterType {
			g.queue(k, nil)
		}
	}
	g.countShadowed()
}

// queue records the change of k not yet taken: r, or its removal (nil).
// A later change of k replaces an earlier one, so that the taken changes
// hold one per key.
func (g *edge) queue(k xds.Key, r *xds.Resource) {
	g.ups = slices.DeleteFunc(g.ups, func(u xds.Resource) bool { return u.Type == k.Type && u.Name == k.Name })
	g.rems = slices.DeleteFunc(g.rems, func(x xds.Key) bool { return x == k })
	if r != nil {
		g.ups = append(g.ups, *r)
	} else {
		g.rems = append(g.rems, k)
	}
}

// merged is what is served at k given the listener side's resource there
// (if any) and the service of that name (if any), false when the service
// serves it alone or nothing is to be served.
func (g *edge) merged(k xds.Key) (xds.Resource, bool) {
	own, mine := g.own[k]
	served := g.services[k.Name]
	switch k.Type {
	case resource.ClusterType:
		// The service's cluster wins; it is applied by the publisher.
		return own, mine && !served
	case resource.ListenerType, resource.RouteType:
		var grpc *xds.Resource
		if served && g.chain != nil {
			l, r := g.chain(k.Name)
			grpc = l
			if k.Type == resource.RouteType {
				grpc = r
			}
		}
		switch {
		case mine && grpc != nil:
			own.GRPC = grpc.Message
			return own, true
		case mine:
			return own, true
		case grpc != nil:
			return *grpc, true
		}
		return xds.Resource{}, false
	}
	return own, mine
}

// merge applies the listener side to a service's upserts, in place: its
// gRPC listener or route configuration whose name the listener side has
// becomes the merged resource.
func (g *edge) merge(ups []xds.Resource) {
	if len(g.own) == 0 {
		return
	}
	for i, r := range ups {
		if r.Type != resource.ListenerType && r.Type != resource.RouteType {
			continue
		}
		if own, ok := g.own[xds.Key{Type: r.Type, Name: r.Name}]; ok {
			own.GRPC = r.Message
			ups[i] = own
		}
	}
}

// resolve applies the listener side to the services' upserts (see merge)
// and removals of one publish: a service cluster's removal gives the name
// to a raw cluster of that name, and a service's gRPC listener or route
// configuration's to the listener side's resource alone.
func (g *edge) resolve(ups []xds.Resource, rems []xds.Key) ([]xds.Resource, []xds.Key) {
	if len(g.own) == 0 {
		return ups, rems
	}
	g.merge(ups)
	kept := rems[:0]
	for _, k := range rems {
		own, ok := g.own[k]
		switch {
		case !ok:
			kept = append(kept, k)
		case k.Type == resource.ClusterType:
			ups = append(ups, own) // the raw cluster is served again
		default:
			ups = append(ups, own) // the listener side's alone, without the gRPC variant
		}
	}
	g.countShadowed()
	return ups, kept
}

// countShadowed sets the gauge of raw clusters hidden by services.
func (g *edge) countShadowed() {
	n := 0
	for k := range g.own {
		if k.Type == resource.ClusterType && g.services[k.Name] {
			n++
		}
	}
	g.m.shadowed.Set(float64(n))
}

func sameResource(a, b xds.Resource) bool {
	return a.Scopes == b.Scopes && a.Denied == b.Denied && a.Private == b.Private && proto.Equal(a.Message, b.Message)
}

func sortedKeys[V any](m map[xds.Key]V) []xds.Key {
	return slices.SortedFunc(maps.Keys(m), func(a, b xds.Key) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
}

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
