package bridge

import (
	"log/slog"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

// istioKinds are the kinds the bridge serves istiod, each a collection
// under every type URL istiod versions ask for it by.
var istioKinds = []istio.Kind{istio.ServiceEntry, istio.WorkloadEntry}

// IstioCollections returns the MCP collection type URLs the bridge serves
// with the istio section c: none when it is disabled, else every one of
// both kinds, also in the inline shape, whose WorkloadEntry collections
// stay empty (istiod asks for each anyway), and the other collections
// istiod asks for, always empty (istio.EmptyCollections).
func IstioCollections(c config.Istio) []string {
	if !c.Enabled {
		return nil
	}
	var out []string
	for _, k := range istioKinds {
		out = append(out, k.TypeURLs()...)
	}
	return append(out, istio.EmptyCollections...)
}

// serveIstio makes p publish every service as Istio resources too when the
// istio section c is enabled.
func (p *publisher) serveIstio(c config.Istio, reg prometheus.Registerer) *publisher {
	if c.Enabled {
		p.istio = NewIstioPublisher(c.Translator, p.log, reg)
		p.istio.Rescope(xds.ScopeSet(p.scopes.Every()), func(...xds.Resource) {})
	}
	return p
}

// IstioPublisher turns services into the MCP resources istiod reads
// (translate/istio), as the bridge applies them to its xDS engine: each
// resource under every type URL of its kind. The bridge's publisher runs
// it under its lock; it is exported for the benchmark server, which serves
// istiod as the bridge does. Not safe for concurrent use.
type IstioPublisher struct {
	t   *istio.Translator
	log *slog.Logger
	// served holds, per service, the resources applied for it, so that an
	// update removes the WorkloadEntries of endpoints that left, a removal
	// removes them all, and Rescope applies them again.
	served map[string][]xds.Resource
	// scopes are the scopes every resource is delivered to (Rescope).
	scopes  xds.ScopeSet
	errors  prometheus.Counter
	dropped prometheus.Counter
}

// NewIstioPublisher returns an IstioPublisher translating with t, which
// registers its counters with reg and logs dropped endpoints to log.
func NewIstioPublisher(t *istio.Translator, log *slog.Logger, reg prometheus.Registerer) *IstioPublisher {
	p := &IstioPublisher{
		t:      t,
		log:    log,
		served: map[string][]xds.Resource{},
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xdsbridge_istio_translate_errors_total",
			Help: "Service versions that could not be translated into Istio resources; the service's last good Istio resources stay served.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xdsbridge_istio_dropped_endpoints_total",
			Help: "Endpoints left out of the Istio resources of a service version because their data breaks a rule of istiod's; the rest of the service is served.",
		}),
	}
	reg.MustRegister(p.errors, p.dropped)
	return p
}

// Upsert returns the resources of svc to apply and the keys it no longer
// has. On a translation error it returns the error and nothing to change:
// the service keeps its last good Istio resources.
func (p *IstioPublisher) Upsert(svc sources.Service) ([]xds.Resource, []xds.Key, error) {
	res, err := p.t.Service(svc)
	if err != nil {
		p.errors.Inc()
		return nil, nil, err
	}
	if n := len(res.Dropped); n > 0 {
		p.dropped.Add(float64(n))
		p.log.Warn("endpoints left out of the Istio resources of a service",
			"service", svc.Name, "dropped", n, "first", res.Dropped[0].Endpoint, "err", res.Dropped[0].Err)
	}
	var ups []xds.Resource
	kept := make(map[xds.Key]bool, 2*len(res.Resources))
	for _, r := range res.Resources {
		for _, url := range r.Kind.TypeURLs() {
			ups = append(ups, xds.Resource{Type: url, Name: r.Name, Message: r.Message, Scopes: p.scopes})
			kept[xds.Key{Type: url, Name: r.Name}] = true
		}
	}
	var gone []xds.Key
	for _, r := range p.served[svc.Name] {
		if k := (xds.Key{Type: r.Type, Name: r.Name}); !kept[k] {
			gone = append(gone, k)
		}
	}
	p.served[svc.Name] = ups
	return ups, gone, nil
}

// Remove returns the keys of every resource applied for the service.
func (p *IstioPublisher) Remove(name string) []xds.Key {
	var keys []xds.Key
	for _, r := range p.served[name] {
		keys = append(keys, xds.Key{Type: r.Type, Name: r.Name})
	}
	delete(p.served, name)
	return keys
}

// Rescope makes every resource, those applied already and those to come,
// delivered by wildcard to the scopes in every, and hands the applied
// ones to add, a service's at a time in the order of their names, to
// apply again with them (none when every is the scopes they have). The
// Istio collections are not scoped: their one client, istiod, needs
// every service whatever scope its node falls in (a collection it is
// sent without an entry deletes that entry), and it scopes what each
// proxy sees itself. A scope's deny does not apply to them either. So
// every should hold every configured scope; unscoped clients get
// everything regardless.
func (p *IstioPublisher) Rescope(every xds.ScopeSet, add func(...xds.Resource)) {
	if every == p.scopes {
		return // served with these scopes already
	}
	p.scopes = every
	for _, name := range slices.Sorted(maps.Keys(p.served)) {
		// A copy: the slice was handed to Apply.
		rs := slices.Clone(p.served[name])
		for i := range rs {
			rs[i].Scopes = every
		}
		p.served[name] = rs
		add(rs...)
	}
}
