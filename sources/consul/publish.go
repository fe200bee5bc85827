package consul

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// publish sends what changed: nothing before the first sync is complete,
// then one Full update, then partial updates of the clusters whose content
// changed; after a reset (reset.go), one Full update marked Reset. Only successful reads change anything, so while some reads fail
// (one datacenter unreachable, say) the others' changes still flow. It
// returns false when ctx ended.
func (l *loop) publish(ctx context.Context, up chan<- sources.Update) bool {
	if !l.synced {
		if !l.syncComplete() {
			return true
		}
		u := l.fullUpdate()
		u.Reset, l.agent.reset = l.agent.reset != "", ""
		if !send(ctx, up, u) {
			return false
		}
		l.synced = true
		if len(l.pollErr) == 0 {
			l.s.recovered()
		}
		l.s.log.Debug("first sync complete", "clusters", len(u.Services), "took", time.Since(l.started).Round(time.Millisecond))
		l.logCoverage()
		return true
	}
	if l.agent.reset != "" {
		// The first update after a reset is the whole state, so that it
		// goes out at once even when nothing changed yet (an agent back
		// with its state intact): the guard learns of the reset when it
		// happened, not with whatever change comes next.
		u := l.fullUpdate()
		u.Reset, l.agent.reset = true, ""
		return send(ctx, up, u)
	}
	if len(l.changed) == 0 {
		return true
	}
	var u sources.Update
	for _, name := range slices.Sorted(maps.Keys(l.changed)) {
		old, had := l.published[name]
		svc, keep := l.build(name)
		switch {
		case keep && had && old.Equal(svc):
		case keep:
			l.published[name] = svc
			u.Services = append(u.Services, svc.Clone())
		case had:
			delete(l.published, name)
			u.Removed = append(u.Removed, name)
		}
	}
	clear(l.changed)
	if len(u.Services) == 0 && len(u.Removed) == 0 {
		return true
	}
	return send(ctx, up, u)
}

// syncComplete reports whether the first datacenter's catalog was read and
// every selected service in it read once, and likewise for each other
// datacenter unless its catalog cannot be read (a WAN partition must not
// keep the local datacenter from being served; the other joins when it
// answers).
func (l *loop) syncComplete() bool {
	for i, d := range l.dcs {
		if i > 0 && !d.catalogSeen && l.pollErr[[2]int{i, int(pollServices)}] {
			continue
		}
		if !d.catalogSeen {
			return false
		}
		for _, st := range d.services {
			if !st.fetched {
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
func (l *loop) build(name string) (svc sources.Service, keep bool) {
	svc.Name = name
	members := l.members[name]
	for k := range members {
		if st := l.dcs[k.dc].services[k.name]; st != nil && st.fetched && !st.mesh {
			svc.Endpoints = append(svc.Endpoints, st.eps...)
		}
	}
	svc.Sort()
	if len(svc.Endpoints) > 0 {
		return svc, true
	}
	if l.s.cfg.OnEmpty == OnEmptyRemove {
		return svc, false
	}
	_, had := l.published[name]
	return svc, l.ordinary(members) || had
}

// ordinary reports whether some member of a cluster is an ordinary
// service (not only proxies or gateways, see keep_mesh).
func (l *loop) ordinary(members map[svcKey]bool) bool {
	for k := range members {
		if st := l.dcs[k.dc].services[k.name]; st != nil && !st.mesh {
			return true
		}
	}
	return false
}
