package consul

import (
	"slices"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// onServices applies an answer of /v1/catalog/services: services that
// appeared are read, services that vanished are removed, services whose
// tags changed are read again. Its index moves on any registration or
// deregistration anywhere, also those that change neither names nor tags
// (a second instance, a new address), and no bulk endpoint says which
// service moved; so any later answer also asks for a sweep, spaced by
// sweepDutyFactor (see the package documentation).
func (l *loop) onServices(dc int, services map[string][]string, aclFiltered bool) {
	d := l.dcs[dc]
	for name, tags := range services {
		k := svcKey{dc, name}
		st := d.services[name]
		if !l.s.cfg.selected(name, tags) {
			if st != nil {
				l.removeService(k)
			}
			continue
		}
		if !slices.IsSorted(tags) {
			tags = slices.Sorted(slices.Values(tags))
		}
		if st == nil {
			l.addService(k, tags)
			continue
		}
		if !slices.Equal(st.tags, tags) {
			st.tags = tags
			l.markSignal(k)
		}
	}
	// When ACLs hid some services (a token that lost rights), services
	// missing from the answer are not removed: an answer that hides
	// nothing removes them.
	if !aclFiltered {
		for name := range d.services {
			if _, ok := services[name]; !ok {
				l.removeService(svcKey{dc, name})
			}
		}
	}
	if d.catalogSeen && l.unwatched(dc) {
		l.sweepWanted[dc] = true
	}
	d.catalogSeen = true
}

func (l *loop) addService(k svcKey, tags []string) {
	d := l.dcs[k.dc]
	cluster, err := renderName(l.s.name, nameData{Service: k.name, Datacenter: d.name, Namespace: l.s.cfg.Namespace, Partition: l.s.cfg.Partition})
	if err != nil {
		l.s.log.Warn("skipping service", "service", k.name, "err", err)
		return
	}
	d.services[k.name] = &svcState{tags: tags, cluster: cluster}
	if l.members[cluster] == nil {
		l.members[cluster] = map[svcKey]bool{}
	}
	l.members[cluster][k] = true
	if l.sweep != nil {
		l.sweep.left[k] = true
	}
	l.markDirty(k)
}

func (l *loop) removeService(k svcKey) {
	d := l.dcs[k.dc]
	st := d.services[k.name]
	delete(d.services, k.name)
	delete(l.dirty, k)
	delete(l.want, k)
	delete(l.behind, k)
	delete(l.viaCache, k)
	delete(l.retries, k)
	delete(l.hostLogged, k)
	l.stopWatch(k)
	l.noteACLFiltered(false, "service "+k.name+" in "+d.name)
	if l.sweep != nil {
		delete(l.sweep.left, k)
		if len(l.sweep.left) == 0 {
			l.endSweep()
		}
	}
	delete(l.members[st.cluster], k)
	if len(l.members[st.cluster]) == 0 {
		delete(l.members, st.cluster)
	}
	l.changed[st.cluster] = true
}

// onChecks applies an answer of /v1/health/state/any, which lists the
// checks that are not passing (see poll). A check the last read of a
// service saw is compared with that read (so that a read which caught a
// short-lived state is corrected even when the status went back before
// this answer), a check missing from the answer counting as passing. A
// check no read saw (new, or of an instance the filters exclude) is diffed
// with the previous answer, so that excluded instances do not cause a read
// on every answer. Output-only updates read nothing.
func (l *loop) onChecks(dc int, checks api.HealthChecks) {
	d := l.dcs[dc]
	next := make(map[checkKey]checkInfo, len(checks))
	for _, c := range checks {
		next[checkKey{c.Node, c.CheckID}] = checkInfo{status: c.Status, service: c.ServiceName, node: c.Node, index: c.ModifyIndex}
	}
	prev := d.checks
	d.checks = next
	byNode := d.servicesByNode()
	holders := func(ci checkInfo) []string {
		if ci.service != "" {
			return []string{ci.service}
		}
		return byNode[ci.node]
	}
	for ck, ci := range next {
		known := false
		for _, name := range holders(ci) {
			st := d.services[name]
			if st == nil || !st.fetched {
				continue
			}
			if status, ok := st.checks[ck]; ok {
				known = true
				if status != ci.status {
					l.markChanged(svcKey{dc, name}, ci.index)
				}
			}
		}
		if known {
			continue
		}
		if old, ok := prev[ck]; prev == nil || !ok || old.status != ci.status {
			for _, name := range holders(ci) {
				if d.services[name] != nil {
					l.markChanged(svcKey{dc, name}, ci.index)
				}
			}
		}
	}
	for name, st := range d.services {
		for ck, status := range st.checks {
			if _, ok := next[ck]; !ok && status != api.HealthPassing {
				l.markSignal(svcKey{dc, name})
				break
			}
		}
	}
}

// onNodes applies an answer of /v1/catalog/nodes: a service is read again
// when a node its last read saw has changed (address, tagged addresses,
// meta: its ModifyIndex differs) or vanished.
func (l *loop) onNodes(dc int, nodes []*api.Node) {
	d := l.dcs[dc]
	next := make(map[string]uint64, len(nodes))
	for _, n := range nodes {
		next[n.Node] = n.ModifyIndex
	}
	for name, st := range d.services {
		for node, idx := range st.nodes {
			if now, ok := next[node]; !ok || now != idx {
				l.markDirty(svcKey{dc, name})
				break
			}
		}
	}
}

func (d *dcState) servicesByNode() map[string][]string {
	m := map[string][]string{}
	for name, st := range d.services {
		for node := range st.nodes {
			m[node] = append(m[node], name)
		}
	}
	return m
}

// seenIn records the nodes and checks a read returned.
func seenIn(entries []*api.ServiceEntry) (map[string]uint64, map[checkKey]string) {
	nodes := map[string]uint64{}
	checks := map[checkKey]string{}
	for _, e := range entries {
		if e == nil || e.Node == nil {
			continue
		}
		nodes[e.Node.Node] = e.Node.ModifyIndex
		for _, c := range e.Checks {
			checks[checkKey{c.Node, c.CheckID}] = c.Status
		}
	}
	return nodes, checks
}

func endpointsEqual(a, b []sources.Endpoint) bool {
	return slices.EqualFunc(a, b, sources.Endpoint.Equal)
}
