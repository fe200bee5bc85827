package bridge

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

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
// configurations built from the services' route claims (routes), the
// configured listeners, and the secrets and raw resources read from files.
// It owns what it last applied of them (own) and the changes not yet
// taken, and decides what is served where their names meet the services'
// own:
//   - a listener or route configuration named like a service's proxyless
//     gRPC chain is served to Envoys, and the chain to gRPC clients, as one
//     resource with a gRPC variant;
//   - a raw cluster named like a service is not served while the service
//     is (the registry's live endpoints win over a static copy); it is
//     counted in xdsbridge_shadowed_resources.
//
// It belongs to the publisher and runs under its lock.
type edge struct {
	routes *routeConfigs
	// listeners are the configured listeners; files the secrets and raw
	// resources as last read; scopes the scoping rules their scopes and
	// grants name.
	listeners []config.Listener
	files     static.State
	scopes    *translate.Scopes
	// chain rebuilds the proxyless gRPC listener and route configuration
	// of a served service (nil when gRPC is off or the service is not
	// served).
	chain func(name string) (listener, route *xds.Resource)

	// own are the listener side's resources by key, as last applied
	// before merging with the services' (see merged); services the names
	// of the services served, servicesPeak the most it held
	// (reclaim.Map).
	own          map[xds.Key]xds.Resource
	services     map[string]bool
	servicesPeak int
	// pending are the changes not yet taken (see take).
	pending  pendingChanges
	shadowed prometheus.Gauge
}

func newEdge(log *slog.Logger, why *atomic.Pointer[routeWhy], reg prometheus.Registerer) *edge {
	shadowed := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xdsbridge_shadowed_resources",
		Help: "Raw clusters from resource files not served because a registry service has the same name.",
	})
	reg.MustRegister(shadowed)
	return &edge{routes: newRouteConfigs(log, why, reg), shadowed: shadowed,
		own: map[xds.Key]xds.Resource{}, services: map[string]bool{}}
}

// configure sets the route rules and listeners of a configuration; every
// route configuration is rebuilt at the next take.
func (g *edge) configure(routes *translate.Routes, listeners []config.Listener) {
	g.routes.configure(routes)
	g.listeners = listeners
	g.sync()
}

// service records svc, served, with its route claims.
func (g *edge) service(svc sources.Service) {
	g.services[svc.Name] = true
	g.routes.service(svc)
}

// remove forgets the service name.
func (g *edge) remove(name string) {
	delete(g.services, name)
	g.routes.remove(name)
}

// take returns the listener side's changes since the last take, after
// rebuilding the route configurations whose claims changed.
func (g *edge) take() ([]xds.Resource, []xds.Key) {
	if g.routes.flush() {
		g.sync()
	}
	g.services = reclaim.Map(g.services, &g.servicesPeak)
	g.routes.reclaim()
	return g.pending.take()
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
// now, before merging with the services'. Secrets are deny unless granted
// where they matter: a secret that holds a private key (a TLS
// certificate), is granted to scopes, or comes from a resource file is
// private, served only to the scopes granted it; a node outside them is
// answered as if it did not exist (see denials).
func (g *edge) wanted() map[xds.Key]xds.Resource {
	every := xds.ScopeSet(g.scopes.Every())
	out := map[xds.Key]xds.Resource{}
	add := func(typ, name string, m proto.Message, scopes xds.ScopeSet, private bool) {
		out[xds.Key{Type: typ, Name: name}] = xds.Resource{Type: typ, Name: name, Message: m, Scopes: scopes, Private: private}
	}
	for name, rc := range g.routes.built {
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
			g.pending.queue(k, &out)
		}
	}
	for _, k := range sortedKeys(g.own) {
		if _, ok := want[k]; ok {
			continue
		}
		delete(g.own, k)
		if out, ok := g.merged(k); ok {
			g.pending.queue(k, &out) // a service's own resource takes the name back
		} else if !g.services[k.Name] || k.Type != resource.ClusterType {
			g.pending.queue(k, nil)
		}
	}
	g.countShadowed()
}

// pendingChanges are changes not yet taken, one per key: a later change
// of a key replaces an earlier one.
type pendingChanges struct {
	ups  []xds.Resource
	rems []xds.Key
}

// queue records the change of k: r, or its removal (nil).
func (c *pendingChanges) queue(k xds.Key, r *xds.Resource) {
	c.ups = slices.DeleteFunc(c.ups, func(u xds.Resource) bool { return u.Type == k.Type && u.Name == k.Name })
	c.rems = slices.DeleteFunc(c.rems, func(x xds.Key) bool { return x == k })
	if r != nil {
		c.ups = append(c.ups, *r)
	} else {
		c.rems = append(c.rems, k)
	}
}

// take returns the changes queued and forgets them.
func (c *pendingChanges) take() ([]xds.Resource, []xds.Key) {
	ups, rems := c.ups, c.rems
	c.ups, c.rems = nil, nil
	return ups, rems
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
	g.shadowed.Set(float64(n))
}

func sameResource(a, b xds.Resource) bool {
	return a.Scopes == b.Scopes && a.Denied == b.Denied && a.Private == b.Private && proto.Equal(a.Message, b.Message)
}

func sortedKeys[V any](m map[xds.Key]V) []xds.Key {
	return slices.SortedFunc(maps.Keys(m), func(a, b xds.Key) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
}
