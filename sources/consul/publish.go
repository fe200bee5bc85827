package consul

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// msgReset is logged when Consul lost its state (tests look for it).
const msgReset = "consul lost its state and is filling up again; the removal guard keeps the last good state until the refill settles"

// publisher turns the answers about services into the source's updates.
// It applies each accepted answer to its service's record, knows which
// services feed each cluster (several datacenters, or several services
// whose cluster_name renders the same name), and sends what changed:
// nothing before the first sync is complete, then one Full update, then
// partial updates of the clusters whose content changed; after a reset,
// one Full update marked Reset. Only successful reads change anything, so
// while some reads fail (one datacenter unreachable, say) the others'
// changes still flow.
type publisher struct {
	cat    catalog
	cfg    *Config
	log    *slog.Logger
	status *sources.Status
	acl    *aclNotes
	agent  *agentMonitor
	// members: the services feeding each cluster, so that building a
	// cluster finds its services without looking at every record.
	members   map[string]map[svcKey]bool
	changed   map[string]bool // clusters to compare and publish
	published map[string]sources.Service
	synced    bool
	// reset: why Consul lost its state, until the update that says so
	// went out; empty when no reset is pending.
	reset   string
	started time.Time
}

func newPublisher(cat catalog, cfg *Config, log *slog.Logger, status *sources.Status, agent *agentMonitor) *publisher {
	return &publisher{cat: cat, cfg: cfg, log: log, status: status, agent: agent, started: time.Now(),
		acl:     &aclNotes{log: log, status: status, filtered: map[string]bool{}},
		members: map[string]map[svcKey]bool{}, changed: map[string]bool{}, published: map[string]sources.Service{}}
}

// join adds service st to its cluster.
func (p *publisher) join(st *svcState) {
	if p.members[st.cluster] == nil {
		p.members[st.cluster] = map[svcKey]bool{}
	}
	p.members[st.cluster][st.key] = true
}

// leave takes a removed service out of its cluster, which is published
// again, and out of the status' ACL note.
func (p *publisher) leave(st *svcState) {
	p.acl.mark(false, "service "+st.key.name+" in "+p.cat[st.key.dc].name)
	delete(p.members[st.cluster], st.key)
	if len(p.members[st.cluster]) == 0 {
		delete(p.members, st.cluster)
	}
	p.changed[st.cluster] = true
}

// markReset records that Consul lost its state: the next update is the
// whole state, marked Reset.
func (p *publisher) markReset(why string) {
	if p.reset == "" {
		p.log.Info(msgReset, "why", why)
	}
	p.reset = why
}

// serveAnswer serves what an accepted answer (of a read or a watch) says of st,
// and reports whether it changed the endpoints st serves.
func (p *publisher) serveAnswer(st *svcState, entries []*api.ServiceEntry, meta *api.QueryMeta) (changed bool) {
	d := p.cat[st.key.dc]
	eps, dropped, hostnames := d.m.endpoints(entries)
	if meta.ResultsFilteredByACLs {
		// The token may have lost rights to some instances: additions
		// are served, removals wait for an answer that hides nothing.
		eps = keepMissing(eps, st.seen.eps)
	}
	p.acl.mark(meta.ResultsFilteredByACLs, "service "+st.key.name+" in "+d.name)
	// Unservable instances count once per change of the service, not
	// once per read: a sweep re-reading an unchanged service adds nothing.
	if dropped > 0 && (!st.seen.fetched || dropped != st.seen.dropped || !endpointsEqual(st.seen.eps, eps)) {
		p.status.Dropped(dropped)
		p.noteDropped(st, dropped, hostnames)
	}
	st.seen.dropped = dropped
	if mesh := !p.cfg.KeepMesh && meshOnly(entries); mesh != st.seen.mesh {
		st.seen.mesh = mesh
		p.changed[st.cluster] = true
	}
	st.seen.nodes, st.seen.checks = seenIn(entries)
	if !st.seen.fetched || !endpointsEqual(st.seen.eps, eps) {
		p.changed[st.cluster] = true
		if st.seen.fetched {
			st.seen.changedAt = time.Now()
			changed = true
		}
	}
	st.seen.eps, st.seen.fetched = eps, true
	return changed
}

// noteDropped logs instances that cannot be served: those with a host name
// instead of an IP once per service at info (they are a choice of the
// registrant, such as ESM external services or synced cloud load
// balancers, and EDS needs IPs), the others at debug.
func (p *publisher) noteDropped(st *svcState, dropped, hostnames int) {
	k, d := st.key, p.cat[st.key.dc]
	if hostnames > 0 && !st.seen.hostLogged {
		st.seen.hostLogged = true
		p.log.Info("instances with a host name instead of an IP address are not served (EDS needs IPs)",
			"service", k.name, "datacenter", d.name, "instances", hostnames)
	}
	if dropped > hostnames {
		p.log.Debug("dropped instances that cannot be served", "service", k.name, "datacenter", d.name, "dropped", dropped-hostnames)
	}
}

// publish sends what changed; first says that this was the first sync.
// It returns ok false when ctx ended.
func (p *publisher) publish(ctx context.Context, up chan<- sources.Update) (first, ok bool) {
	if !p.synced {
		if !p.syncComplete() {
			return false, true
		}
		u := p.fullUpdate()
		u.Reset, p.reset = p.reset != "", ""
		if !send(ctx, up, u) {
			return false, false
		}
		p.synced = true
		p.log.Debug("first sync complete", "clusters", len(u.Services), "took", time.Since(p.started).Round(time.Millisecond))
		return true, true
	}
	if p.reset != "" {
		// The first update after a reset is the whole state, so that it
		// goes out at once even when nothing changed yet (an agent back
		// with its state intact): the guard learns of the reset when it
		// happened, not with whatever change comes next.
		u := p.fullUpdate()
		u.Reset, p.reset = true, ""
		return false, send(ctx, up, u)
	}
	if len(p.changed) == 0 {
		return false, true
	}
	var u sources.Update
	for _, name := range slices.Sorted(maps.Keys(p.changed)) {
		old, had := p.published[name]
		svc, keep := p.build(name)
		switch {
		case keep && had && old.Equal(svc):
		case keep:
			p.published[name] = svc
			u.Services = append(u.Services, svc.Clone())
		case had:
			delete(p.published, name)
			u.Removed = append(u.Removed, name)
		}
	}
	clear(p.changed)
	if len(u.Services) == 0 && len(u.Removed) == 0 {
		return false, true
	}
	return false, send(ctx, up, u)
}

// fullUpdate builds the source's complete state, records it as
// published, and returns it as a Full update.
func (p *publisher) fullUpdate() sources.Update {
	names := make(map[string]bool, len(p.members)+len(p.published))
	for name := range p.members {
		names[name] = true
	}
	for name := range p.published {
		names[name] = true
	}
	u := sources.Update{Full: true}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if svc, keep := p.build(name); keep {
			p.published[name] = svc
			u.Services = append(u.Services, svc.Clone())
		} else {
			delete(p.published, name)
		}
	}
	clear(p.changed)
	return u
}

// syncComplete reports whether the first datacenter's catalog was read and
// every selected service in it read once, and likewise for each other
// datacenter unless its catalog cannot be read (a WAN partition must not
// keep the local datacenter from being served; the other joins when it
// answers).
func (p *publisher) syncComplete() bool {
	for i, d := range p.cat {
		if i > 0 && !d.catalogSeen && p.agent.catalogFailing(i) {
			continue
		}
		if !d.catalogSeen {
			return false
		}
		for _, st := range d.services {
			if !st.seen.fetched {
				return false
			}
		}
	}
	return true
}

// build merges the endpoints of every service feeding cluster name. keep
// is false when the cluster is to be removed (or never published): no
// endpoints and on_empty=remove, or no service feeds it any more and it
// was never published.
func (p *publisher) build(name string) (svc sources.Service, keep bool) {
	svc.Name = name
	members := p.members[name]
	for k := range members {
		if st := p.cat.find(k); st != nil && st.seen.fetched && !st.seen.mesh {
			svc.Endpoints = append(svc.Endpoints, st.seen.eps...)
		}
	}
	svc.Sort()
	if len(svc.Endpoints) > 0 {
		return svc, true
	}
	if p.cfg.OnEmpty == OnEmptyRemove {
		return svc, false
	}
	_, had := p.published[name]
	return svc, p.ordinary(members) || had
}

// ordinary reports whether some member of a cluster is an ordinary
// service (not only proxies or gateways, see keep_mesh).
func (p *publisher) ordinary(members map[svcKey]bool) bool {
	for k := range members {
		if st := p.cat.find(k); st != nil && !st.seen.mesh {
			return true
		}
	}
	return false
}

// keepMissing adds to eps the endpoints of old whose address and port eps
// lacks: what an answer with results hidden by ACLs may not remove.
func keepMissing(eps, old []sources.Endpoint) []sources.Endpoint {
	type ap struct {
		addr string
		port uint32
	}
	have := make(map[ap]bool, len(eps))
	for _, e := range eps {
		have[ap{e.Address, e.Port}] = true
	}
	added := false
	for _, e := range old {
		if !have[ap{e.Address, e.Port}] {
			eps = append(eps, e)
			added = true
		}
	}
	if added {
		slices.SortFunc(eps, sources.Endpoint.Compare)
	}
	return eps
}
