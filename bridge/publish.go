package bridge

import (
	"log/slog"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/static"
	"github.com/xdsbridge/xdsbridge/transform"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// applier is the part of the xDS engine the publisher feeds: Apply upserts
// and removes resources as one change (see xds.Server.Apply).
type applier interface {
	Apply(upserts []xds.Resource, removals []xds.Key)
}

// scopeSetter is the part of the engine that maps nodes to scopes (see
// xds.Server.SetScopes); an applier without it (a dry run) scopes no
// stream.
type scopeSetter interface {
	SetScopes(xds.Scoper)
}

var _ applier = (*xds.Server)(nil)

// publisher turns the manager's changes into xDS resources and applies
// them to the engine, with the listener side's (edge): each publish is one
// change to the engine, built a resource at a time (see change). It owns
// the translation options and the scoping rules, the record of the
// services served (why) and the edge. publish runs on the manager's
// publishing goroutine, files on the files' watcher's and scope on a
// reload's: mu orders them, and guards every field but why, which has a
// lock of its own for the admin handlers that read it.
type publisher struct {
	mu     sync.Mutex
	server applier
	// scopes are the per-node scoping rules: each service's resources
	// carry the scopes that deliver it and those denied it.
	scopes *translate.Scopes
	opts   translate.Options
	log    *slog.Logger
	// errors counts services that failed translation; their last good
	// resources stay served.
	errors prometheus.Counter
	// services is the number of services served.
	services prometheus.Gauge
	// transforms runs the configured transforms; why keeps the services
	// whose resources are applied, as served, with their provenance (see
	// debug.go): it is the publisher's record of what it serves.
	transforms *transforms
	why        *why
	// istio, if set, also publishes every service as Istio resources.
	istio *IstioPublisher
	// failed is the running publish's Changes.Failed while it runs: the
	// engine refuses a resource version (one too large to send) as it is
	// added to the change, and refused forwards that to the sources
	// reporting the service, as a translation error is.
	failed func(service string, err error)
	// edge keeps the listener side: route configurations, listeners,
	// secrets and raw resources (see edge.go); published says the first
	// publish happened, before which its changes wait (the first Apply
	// marks the engine ready).
	edge      *edge
	published bool
}

func newPublisher(server applier, grpc bool, log *slog.Logger, reg prometheus.Registerer) *publisher {
	p := &publisher{
		server: server,
		opts:   translate.Options{GRPC: grpc},
		log:    log,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xdsbridge_translate_errors_total",
			Help: "Service versions that could not be translated; the service's last good resources stay served.",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xdsbridge_services",
			Help: "Services whose resources are served.",
		}),
		transforms: newTransforms(nil, log),
		why:        &why{services: map[string]sources.Service{}},
	}
	reg.MustRegister(p.errors, p.services)
	p.edge = newEdge(log, &p.why.routes, reg)
	if grpc {
		p.edge.chain = p.grpcChain
	}
	return p
}

// envoy sets the route rules and the listeners.
func (p *publisher) envoy(routes *translate.Routes, listeners []config.Listener) *publisher {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.edge.configure(routes, listeners)
	return p
}

// files takes a new state of the secrets and resource files and applies
// what changed (after the first publish; until then it waits for it).
func (p *publisher) files(st static.State) *publisher {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.edge.setFiles(st)
	p.applyEdge()
	return p
}

// applyEdge applies the listener side's pending changes once the engine
// is ready. p.mu held.
func (p *publisher) applyEdge() {
	if !p.published {
		return
	}
	if ups, rems := p.edge.take(); len(ups)+len(rems) > 0 {
		p.server.Apply(ups, rems)
	}
}

// grpcChain is the proxyless gRPC listener and route configuration of a
// served service, nil when gRPC is off or the service is not served.
func (p *publisher) grpcChain(name string) (*xds.Resource, *xds.Resource) {
	svc, ok := p.why.get(name)
	if !ok || !p.opts.GRPC {
		return nil, nil
	}
	l, err := translate.Listener(name)
	if err != nil {
		return nil, nil
	}
	rs := p.scoped(svc, []xds.Resource{
		{Type: resource.ListenerType, Name: name, Message: l, GRPCOnly: true},
		{Type: resource.RouteType, Name: name, Message: translate.Route(name), GRPCOnly: true},
	})
	return &rs[0], &rs[1]
}

// shape sets the cluster shaping rules and the transforms (nil: none).
func (p *publisher) shape(s *translate.Shaping, chain *transform.Chain) *publisher {
	p.opts.Shaping = s
	p.transforms = newTransforms(chain, p.log)
	p.why.shaping = s
	return p
}

// publish translates every upserted service and removes every removed one,
// in one Apply. It is called for the first publish too, even when empty,
// because the first Apply marks the engine ready.
func (p *publisher) publish(c manager.Changes) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c = p.transforms.apply(c)
	// Refusals come as each resource is added to the change.
	p.failed = c.Failed
	defer func() { p.failed = nil }()
	ch := newChange(p.server)
	var removals []xds.Key
	for _, svc := range c.Upserted {
		if p.istio != nil {
			ups, gone, err := p.istio.Upsert(svc)
			p.fail(c, svc.Name, err, "cannot serve the new version of a service to istiod; keeping its last good Istio resources")
			ch.upsert(ups...)
			removals = append(removals, gone...)
		}
		rs, err := p.build(svc)
		if err != nil {
			p.errors.Inc()
			p.fail(c, svc.Name, err, "cannot serve the new version of a service; keeping its last good resources")
			continue
		}
		ch.upsert(rs...)
		p.why.set(svc)
		p.edge.service(svc)
	}
	for _, name := range c.Removed {
		if p.istio != nil {
			removals = append(removals, p.istio.Remove(name)...)
		}
		if _, ok := p.why.get(name); !ok {
			continue // never translated successfully: nothing to remove
		}
		p.why.remove(name)
		p.edge.remove(name)
		removals = append(removals, xds.Key{Type: resource.ClusterType, Name: name},
			xds.Key{Type: resource.EndpointType, Name: name})
		if p.opts.GRPC {
			removals = append(removals, xds.Key{Type: resource.ListenerType, Name: name},
				xds.Key{Type: resource.RouteType, Name: name})
		}
	}
	ups, removals := p.edge.resolve(nil, removals)
	ch.upsert(ups...)
	ch.remove(removals...)
	ups, rems := p.edge.take()
	ch.upsert(ups...)
	ch.remove(rems...)
	p.published = true
	n := ch.apply()
	p.services.Set(float64(p.why.count()))
	p.log.Debug("applied changes", "upserted", len(c.Upserted), "removed", len(c.Removed), "resources", n)
}

// build translates svc into its xDS resources as served: with the scopes
// that deliver it and those it is denied to, and merged with the listener
// side's resources of the same names (edge.merge). A publish and a
// rescope build a service alike.
func (p *publisher) build(svc sources.Service) ([]xds.Resource, error) {
	r, err := translate.Service(svc, p.opts)
	if err != nil {
		return nil, err
	}
	rs := p.scoped(svc, resources(svc.Name, r))
	p.edge.merge(rs)
	return rs, nil
}

// scoped sets on each resource of svc the scopes that deliver it and
// those it is denied to.
func (p *publisher) scoped(svc sources.Service, rs []xds.Resource) []xds.Resource {
	in, denied := p.scopes.Membership(svc)
	for i := range rs {
		rs[i].Scopes, rs[i].Denied = xds.ScopeSet(in), xds.ScopeSet(denied)
	}
	return rs
}

// scope sets the scoping rules. Once the publisher has published, the
// served services whose scopes change are translated again and applied
// with their new scopes, the Istio resources with every scope
// (IstioPublisher.Rescope) and the listener side's with theirs, all in
// one change to the engine, built a service at a time as a publish is
// (see change); and then the engine learns the new mapping of nodes to
// scopes: each client is sent what its scope gained and the removal of
// what it lost. A service whose scopes and denials are the same under
// both rules is served as it would be built now, so it is left out of
// the change rather than built to be a no-op to the engine: its
// resources merged with the listener side's follow the listener side's
// own (edge.setScopes).
func (p *publisher) scope(s *translate.Scopes) *publisher {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.scopes
	p.scopes = s
	p.why.setScopes(s)
	p.edge.setScopes(s)
	ch := newChange(p.server)
	for _, svc := range p.why.all() {
		oldIn, oldDenied := was.Membership(svc)
		if in, denied := s.Membership(svc); in == oldIn && denied == oldDenied {
			continue
		}
		rs, err := p.build(svc)
		if err != nil {
			continue // not served in this version either: its last good resources stay
		}
		ch.upsert(rs...)
	}
	if p.istio != nil {
		p.istio.Rescope(xds.ScopeSet(s.Every()), ch.upsert)
	}
	if p.published {
		ups, rems := p.edge.take()
		ch.upsert(ups...)
		ch.remove(rems...)
	}
	if !ch.empty() {
		ch.apply()
	}
	if ss, ok := p.server.(scopeSetter); ok {
		if s == nil {
			ss.SetScopes(nil)
		} else {
			ss.SetScopes(s.Of)
		}
	}
	return p
}

// fail reports a translation error of a service, if err is one, to the
// sources reporting it (their /sources status shows it) and to the log.
func (p *publisher) fail(c manager.Changes, service string, err error, msg string) {
	if err == nil {
		return
	}
	if c.Failed != nil {
		c.Failed(service, err)
	}
	p.log.Error(msg, "service", service, "err", err)
}

// refused is told by the engine (xds.Options.OnRefused, called inside
// Apply) of a resource version it will not serve; the service keeps its
// last good version, and /sources shows why under the sources reporting
// it.
func (p *publisher) refused(k xds.Key, err error) {
	if p.failed != nil {
		p.failed(k.Name, err)
	}
}

// resources lists the xDS resources of one translated service.
func resources(name string, r translate.Resources) []xds.Resource {
	out := []xds.Resource{
		{Type: resource.ClusterType, Name: name, Message: r.Cluster},
		{Type: resource.EndpointType, Name: name, Message: r.Assignment},
	}
	if r.GRPCCluster != nil {
		out[0].GRPC = r.GRPCCluster
	}
	if r.Listener != nil {
		out = append(out, xds.Resource{Type: resource.ListenerType, Name: name, Message: r.Listener, GRPCOnly: true})
	}
	if r.Route != nil {
		out = append(out, xds.Resource{Type: resource.RouteType, Name: name, Message: r.Route, GRPCOnly: true})
	}
	return out
}
