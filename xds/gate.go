package xds

// The make-before-break gate, per client. Sending types in rank order
// (owed.go) orders one push; the gate orders across pushes and streams:
//
//   - A route configuration or listener that sends traffic to a cluster
//     (entry.refs) is deferred for a client until that client has the
//     cluster ready: the cluster sent, and, for an EDS cluster, its
//     assignment sent too, so that Envoy has finished warming it. On ADS,
//     where Envoy handles responses in the order they are sent, "sent" is
//     enough; on per-type streams, which have no order between them, the
//     CDS and EDS streams of the same Envoy must have acknowledged
//     (ACKed or NACKed) the responses that carried them.
//   - A cluster's removal (and its assignment's) is deferred while a
//     route configuration or listener the client holds still sends
//     traffic to it; on per-type streams, until the client has
//     acknowledged the update that stopped naming it.
//
// Only the clusters the client is getting are waited for: a cluster the
// server does not have (a cluster of the client's bootstrap, say), or that
// the client's subscription does not deliver (another scope's, or one a
// gRPC client has not asked for yet, since gRPC fetches a route before its
// clusters), defers nothing. Nothing is deferred on a timer: what is deferred
// goes as soon as the client's own requests and acknowledgements let it.
//
// Per-type streams of one Envoy are found by their node and connection
// (peer address): a group. Its members publish, under the group's lock,
// what the others need: the clusters and assignments they have ACKed,
// and the clusters the route configurations and listeners they hold name.
// Lock order: client.mu, then group.mu, then a writer's (a poke).

// ready reports whether the client has every cluster e sends traffic to
// ready, or is not getting it (see above). client.mu held.
func (c *client) ready(e *entry) bool {
	if len(e.refs) == 0 || c.s.gate.off {
		return true
	}
	if c.member != nil {
		return c.member.g.ready(c, e)
	}
	cw, ew := c.watches[ClusterType], c.watches[EndpointType]
	if cw == nil {
		return true // not a client of our clusters
	}
	ct, et := c.s.gate.cds, c.s.gate.eds
	for _, name := range e.refs {
		sl := ct.current(name)
		if sl == nil {
			continue // the server has no such cluster
		}
		h, sent := cw.sent.get(sl)
		if !sent {
			if p, pending := cw.dirty[sl]; pending && p.e != nil {
				return false // on its way
			}
			continue // not delivered to this client
		}
		if h == nil || h == stale {
			return false // subscribed, not sent yet
		}
		esl := et.current(h.edsName)
		if h.edsName == "" || esl == nil {
			continue // no assignment to wait for
		}
		if ew == nil {
			return false // the client has not asked for endpoints yet
		}
		if a, _ := ew.sent.get(esl); a == nil || a == stale {
			return false
		}
	}
	return true
}

// current returns the slot of name if the store has an entry there (in
// its published table), without Server.mu; nil otherwise.
func (t *typeState) current(name string) *slot {
	sl := t.named(name)
	if sl == nil || t.chunk(sl.idx>>chunkBits).at(sl.idx&(chunkLen-1)) == nil {
		return nil
	}
	return sl
}

// needed reports whether a route configuration or listener the client
// holds still sends traffic to the cluster of slot sl (a cluster's, or an
// assignment's of the same name): its removal must wait. client.mu held.
func (c *client) needed(w *watch, sl *slot) bool {
	if c.s.gate.off || (w.t.url != ClusterType && w.t.url != EndpointType) {
		return false
	}
	if c.member != nil {
		return c.member.g.needed(c, sl.name)
	}
	for _, t := range []string{RouteType, ListenerType} {
		if rw := c.watches[t]; rw != nil && rw.sent.refersTo(sl.name) {
			return true
		}
	}
	return false
}

// refersTo reports whether an entry the client holds sends traffic to
// cluster. client.mu held.
func (h *sentSet) refersTo(cluster string) bool {
	for e := range h.entries() {
		if containsSorted(e.refs, cluster) {
			return true
		}
	}
	return false
}

func containsSorted(list []string, s string) bool {
	lo, hi := 0, len(list)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case list[m] == s:
			return true
		case list[m] < s:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// named returns the slot of name without Server.mu, nil if it has none.
// Only the cluster and assignment stores keep this index (see
// slotStore.index).
func (t *slotStore) named(name string) *slot {
	if v, ok := t.index.Load(name); ok {
		return v.(*slot)
	}
	return nil
}

// join makes c, a per-type stream whose node is now known, a member of
// its Envoy's group. Server.mu and client.mu held.
func (r *registry) join(c *client) {
	url := streamType(c.variant)
	if url == "" || c.node == nil {
		return // ADS orders itself
	}
	k := groupKey{peer: c.peer, node: c.node.GetId()}
	g := r.groups[k]
	if g == nil {
		g = &group{s: c.s}
		r.groups[k] = g
	}
	m := &member{g: g, c: c, url: url, refs: map[string]int{}}
	g.mu.Lock()
	g.members = append(g.members, m)
	g.mu.Unlock()
	c.member = m
	c.groupKey = k
}

// leave removes c from its group, and the group once empty; the others
// are poked, as what they waited for may never come. Server.mu and
// client.mu held.
func (r *registry) leave(c *client) {
	m := c.member
	if m == nil {
		return
	}
	g := m.g
	g.mu.Lock()
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	empty := len(g.members) == 0
	g.mu.Unlock()
	if empty {
		delete(r.groups, c.groupKey)
	}
	g.pokeBlocked()
}

// of returns the member streaming type url, nil if none.
func (g *group) of(url string) *member {
	for _, m := range g.members {
		if m.url == url {
			return m
		}
	}
	return nil
}

// ready is client.ready for a member c of g. client.mu (of c) held.
func (g *group) ready(c *client, e *entry) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	cm := g.of(ClusterType)
	if cm == nil || !cm.wildcard {
		return true // the Envoy takes its clusters elsewhere, or names them itself
	}
	ct, et := g.s.gate.cds, g.s.gate.eds
	for _, name := range e.refs {
		sl := ct.named(name)
		if sl == nil {
			continue
		}
		cur := ct.chunkIn(c.scope, sl.idx>>chunkBits).at(sl.idx & (chunkLen - 1))
		if cur == nil {
			continue // not in the Envoy's scope
		}
		if !cm.acked.has(sl) {
			return g.block(c)
		}
		if cur.edsName == "" {
			continue
		}
		esl := et.named(cur.edsName)
		if esl == nil {
			continue
		}
		em := g.of(EndpointType)
		if em == nil || !em.acked.has(esl) {
			return g.block(c)
		}
	}
	return true
}

// block marks c's member as deferring something, and returns false
// (for ready). g.mu held.
func (g *group) block(c *client) bool {
	c.member.blocked.Store(true)
	return false
}

// needed is client.needed for a member c of g.
func (g *group) needed(c *client, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()

	for _, m := range g.members {
		if m.refs[name] > 0 {
			g.block(c)
			return true
		}
	}
	return false
}

// pokeBlocked pokes the members deferring something, for a change of
// what they wait for.
func (g *group) pokeBlocked() {
	g.mu.Lock()
	var poke []*client
	for _, m := range g.members {
		if m.blocked.Swap(false) {
			poke = append(poke, m.c)
		}
	}
	g.mu.Unlock()
	for _, c := range poke {
		c.poke()
	}
}

// noteSent records, for the watch of type url of member m (nil: not on
// per-type streams, nothing to note), that sl was sent e in place of h: a
// CDS or EDS stream notes a new delivery to publish once acknowledged, an
// LDS or RDS stream counts the clusters e names at once and uncounts those
// h named once acknowledged. client.mu held.
func (n *gateNotes) noteSent(m *member, url string, sl *slot, h, e *entry) {
	if m == nil {
		return
	}
	switch url {
	case ClusterType, EndpointType:
		if e != nil && (h == nil || h == stale) {
			if n.fresh == nil {
				n.fresh = make(map[*slot]struct{})
			}
			n.fresh[sl] = struct{}{}
		}
		if e == nil {
			delete(n.fresh, sl)
			m.g.mu.Lock()
			m.acked.clear(sl)
			m.g.mu.Unlock()
		}
	case RouteType, ListenerType:
		if e != nil && len(e.refs) > 0 {
			m.g.mu.Lock()
			for _, r := range e.refs {
				m.refs[r]++
			}
			m.g.mu.Unlock()
		}
		if h != nil && h != stale && len(h.refs) > 0 {
			n.unacked = append(n.unacked, h.refs)
		}
	}
}

// acknowledged publishes to member m (nil: none) what its client
// acknowledged with its latest response of the watch's type (an ACK or a
// NACK: either way it has processed it), and pokes the members waiting
// for it. client.mu held.
func (n *gateNotes) acknowledged(m *member) {
	if m == nil || (len(n.fresh) == 0 && len(n.unacked) == 0) {
		return
	}
	m.g.mu.Lock()
	for sl := range n.fresh {
		m.acked.set(sl)
	}
	for _, refs := range n.unacked {
		for _, r := range refs {
			if m.refs[r]--; m.refs[r] <= 0 {
				delete(m.refs, r)
			}
		}
	}
	m.g.mu.Unlock()
	clear(n.fresh)
	n.unacked = nil
	m.g.pokeBlocked()
}

// streamType is the type a per-type stream of variant serves, "" for ADS.
func streamType(variant string) string {
	switch variant[max(0, len(variant)-3):] {
	case "cds":
		return ClusterType
	case "eds":
		return EndpointType
	case "lds":
		return ListenerType
	case "rds":
		return RouteType
	case "sds":
		return SecretType
	}
	return ""
}
