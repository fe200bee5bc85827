package consul

import (
	"log/slog"
	"slices"
	"text/template"

	"github.com/hashicorp/consul/api"
)

// signals applies the answers of the bulk queries (poller) to the
// catalog: a service that appears gets a record and is read, one that
// vanishes is removed, and a change the answers attribute to a service
// (its tags, one of its checks, one of its nodes) queues a read of it,
// unless it is watched: its watch answers with the change itself.
type signals struct {
	cat     catalog
	cfg     *Config
	name    *template.Template
	log     *slog.Logger
	acl     *aclNotes
	reads   *readQueue
	watches *watchSet
	sweeps  *sweeper
	pub     *publisher
}

// onServices applies an answer of /v1/catalog/services: services that
// appeared are read, services that vanished are removed, services whose
// tags changed are read again. Its index moves on any registration or
// deregistration anywhere, also those that change neither names nor tags
// (a second instance, a new address), and no bulk endpoint says which
// service moved; so any later answer may ask for a sweep (sweeper).
func (g *signals) onServices(dc int, services map[string][]string, aclFiltered bool) {
	g.acl.mark(aclFiltered, "catalog services in "+g.cat[dc].name)
	d := g.cat[dc]
	for name, tags := range services {
		k := svcKey{dc, name}
		st := d.services[name]
		if !g.cfg.selected(name, tags) {
			if st != nil {
				g.remove(k)
			}
			continue
		}
		if !slices.IsSorted(tags) {
			tags = slices.Sorted(slices.Values(tags))
		}
		if st == nil {
			g.add(k, tags)
			continue
		}
		if !slices.Equal(st.tags, tags) {
			st.tags = tags
			g.reads.markSignal(st)
		}
	}
	// When ACLs hid some services (a token that lost rights), services
	// missing from the answer are not removed: an answer that hides
	// nothing removes them.
	if !aclFiltered {
		for name := range d.services {
			if _, ok := services[name]; !ok {
				g.remove(svcKey{dc, name})
			}
		}
	}
	g.sweeps.catalogMoved(dc, !d.catalogSeen)
	d.catalogSeen = true
}

// add adds a record for service k, joined to its cluster and read.
func (g *signals) add(k svcKey, tags []string) {
	d := g.cat[k.dc]
	cluster, err := renderName(g.name, nameData{Service: k.name, Datacenter: d.name, Namespace: g.cfg.Namespace, Partition: g.cfg.Partition})
	if err != nil {
		g.log.Warn("skipping service", "service", k.name, "err", err)
		return
	}
	st := &svcState{key: k, tags: tags, cluster: cluster}
	d.services[k.name] = st
	g.pub.join(st)
	g.sweeps.join(st)
	g.reads.markDirty(st)
}

// remove forgets service k: its record holds all the source knows of it,
// so deleting the record forgets it (the lanes, delayed reads and retries
// that name it skip it from then on), and what the record holds of state
// shared with other services is given back: its watch (a goroutine and a
// place on a lane), its place in a running sweep, and its share of its
// cluster, which is published again.
func (g *signals) remove(k svcKey) {
	d := g.cat[k.dc]
	st := d.services[k.name]
	delete(d.services, k.name)
	g.watches.stop(st)
	if st.sweep != nil {
		st.sweep.looked(st)
	}
	g.pub.leave(st)
}

// onChecks applies an answer of /v1/health/state/any, which lists the
// checks that are not passing (see poll). A check the last read of a
// service saw is compared with that read (so that a read which caught a
// short-lived state is corrected even when the status went back before
// this answer), a check missing from the answer counting as passing. A
// check no read saw (new, or of an instance the filters exclude) is diffed
// with the previous answer, so that excluded instances do not cause a read
// on every answer. Output-only updates read nothing.
func (g *signals) onChecks(dc int, checks api.HealthChecks) {
	d := g.cat[dc]
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
			if st == nil || !st.seen.fetched {
				continue
			}
			if status, ok := st.seen.checks[ck]; ok {
				known = true
				if status != ci.status {
					g.reads.markChanged(st, ci.index)
				}
			}
		}
		if known {
			continue
		}
		if old, ok := prev[ck]; prev == nil || !ok || old.status != ci.status {
			for _, name := range holders(ci) {
				if st := d.services[name]; st != nil {
					g.reads.markChanged(st, ci.index)
				}
			}
		}
	}
	for _, st := range d.services {
		for ck, status := range st.seen.checks {
			if _, ok := next[ck]; !ok && status != api.HealthPassing {
				g.reads.markSignal(st)
				break
			}
		}
	}
}

// onNodes applies an answer of /v1/catalog/nodes: a service is read again
// when a node its last read saw has changed (address, tagged addresses,
// meta: its ModifyIndex differs) or vanished; the services of the nodes
// that appeared (onNew) are read unless watched.
func (g *signals) onNodes(dc int, nodes []*api.Node, onNew []string) {
	d := g.cat[dc]
	next := make(map[string]uint64, len(nodes))
	for _, n := range nodes {
		next[n.Node] = n.ModifyIndex
	}
	for _, st := range d.services {
		for node, idx := range st.seen.nodes {
			if now, ok := next[node]; !ok || now != idx {
				g.reads.markDirty(st)
				break
			}
		}
	}
	for _, name := range onNew {
		if st := d.services[name]; st != nil {
			g.reads.markSignal(st)
		}
	}
}
