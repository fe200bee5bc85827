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
			l.markSignal(st)
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
	unwatched := l.unwatched(dc)
	if d.catalogSeen && unwatched && !d.dumped {
		l.sweepWanted[dc] = true
	}
	l.s.census[dc].Store(unwatched)
	d.catalogSeen = true
}

func (l *loop) addService(k svcKey, tags []string) {
	d := l.dcs[k.dc]
	cluster, err := renderName(l.s.name, nameData{Service: k.name, Datacenter: d.name, Namespace: l.s.cfg.Namespace, Partition: l.s.cfg.Partition})
	if err != nil {
		l.s.log.Warn("skipping service", "service", k.name, "err", err)
		return
	}
	st := &svcState{key: k, tags: tags, cluster: cluster}
	d.services[k.name] = st
	if l.members[cluster] == nil {
		l.members[cluster] = map[svcKey]bool{}
	}
	l.members[cluster][k] = true
	if sw := l.sweep; sw != nil {
		st.sweep = sw
		sw.left++
	}
	l.markDirty(st)
}

// removeService forgets service k: its record holds all the loop knows
// of it, so deleting the record forgets it (the queues, delayed reads and
// retries that name it skip it from then on), and leave gives back what
// the record holds of state shared with other services.
func (l *loop) removeService(k svcKey) {
	d := l.dcs[k.dc]
	st := d.services[k.name]
	delete(d.services, k.name)
	l.leave(st)
}

// leave gives back what a removed service's record holds of state shared
// with other services: its watch (a goroutine and a place on a lane), its
// place in a running sweep, its line in the status' ACL note, and its
// share of its cluster, which is published again.
func (l *loop) leave(st *svcState) {
	l.stopWatch(st)
	l.noteACLFiltered(false, "service "+st.key.name+" in "+l.dcs[st.key.dc].name)
	l.leaveSweep(st)
	delete(l.members[st.cluster], st.key)
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
					l.markChanged(st, ci.index)
				}
			}
		}
		if known {
			continue
		}
		if old, ok := prev[ck]; prev == nil || !ok || old.status != ci.status {
			for _, name := range holders(ci) {
				if st := d.services[name]; st != nil {
					l.markChanged(st, ci.index)
				}
			}
		}
	}
	for _, st := range d.services {
		for ck, status := range st.checks {
			if _, ok := next[ck]; !ok && status != api.HealthPassing {
				l.markSignal(st)
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
	for _, st := range d.services {
		for node, idx := range st.nodes {
			if now, ok := next[node]; !ok || now != idx {
				l.markDirty(st)
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
