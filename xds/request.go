package xds

import (
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// hashNames is an order-insensitive digest of a resource_names list, so that
// the common SotW request (an ACK repeating the same names) is recognised
// without touching the index or Server.mu.
func hashNames(names []string) uint64 {
	var sum, x uint64
	for _, n := range names {
		h := xxhash.Sum64String(n)
		sum += h
		x ^= h * 0x9e3779b97f4a7c15
	}
	return sum ^ (x << 1) ^ uint64(len(names))
}

// identify records the node of the first request. Both locks held.
func (c *client) identify(n *corev3.Node) {
	if c.node == nil && n != nil {
		c.node = n
		c.grpc = isGRPC(n)
	}
}

// request is what onSotW and onDelta read alike from either request type.
type request interface {
	GetTypeUrl() string
	GetNode() *corev3.Node
}

// typeOf is the type a request is for: the per-type stream's fixed type,
// else the request's type_url. "" (logged) means the request is ignored.
func (s *Server) typeOf(c *client, fixed string, req request) string {
	if fixed != "" {
		return fixed
	}
	typ := req.GetTypeUrl()
	if typ == "" {
		s.log.Debug("ignoring request without type_url", "peer", c.peer)
	}
	return typ
}

// lock takes Server.mu and client.mu for a subscription change, records the
// client's node and returns its watch of typ; release both with unlock. It
// returns nil, with nothing held, when the client has disconnected.
func (s *Server) lock(c *client, typ string, req request) *watch {
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil
	}
	c.mu.Lock()
	c.identify(req.GetNode())
	return c.watchFor(s.typeFor(typ))
}

// unlock releases what lock took.
func (s *Server) unlock(c *client) {
	c.mu.Unlock()
	s.mu.Unlock()
}

// onSotW handles one SotW request; fixed is the type of a per-type stream.
func (s *Server) onSotW(c *client, fixed string, req *discoveryv3.DiscoveryRequest) {
	typ := s.typeOf(c, fixed, req)
	if typ == "" {
		return
	}
	names := req.GetResourceNames()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil {
		w.ackSotW(req)
		if w.started && len(names) > 0 && len(names) == len(w.lastNames) && &names[0] == &w.lastNames[0] {
			c.mu.Unlock()
			return // fastest path: the very same shared list (see Codec)
		}
	}
	c.mu.Unlock()
	h := hashNames(names)
	c.mu.Lock()
	if w != nil && w.started && h == w.namesHash {
		w.lastNames = nil
		if isShared(names) {
			w.lastNames = names
		}
		c.mu.Unlock()
		return // fast path: an ACK/NACK with an unchanged subscription
	}
	c.mu.Unlock()

	now := time.Now()
	if w = s.lock(c, typ, req); w == nil {
		return
	}
	defer s.unlock(c)
	t := w.t
	first := !w.started
	w.started, w.namesHash, w.lastNames = true, h, nil
	if isShared(names) {
		w.lastNames = names
	}

	// An empty list is the legacy wildcard for CDS/LDS on the first request
	// and keeps it afterwards; otherwise it unsubscribes everything.
	wild := slices.Contains(names, "*") || (len(names) == 0 && t.full && (first || w.wildcard))
	want := make(map[*slot]struct{}, len(names))
	for _, n := range names {
		if n != "*" {
			want[t.get(n)] = struct{}{}
		}
	}
	w.unsubscribeExcept(want)
	w.setWildcard(wild, now)
	for sl := range want {
		if !w.explicit(sl) {
			w.subscribe(sl, now)
		}
	}
	if first && wild {
		w.initial = true
	}
	c.poke()
}

// unsubscribeExcept drops every explicit name not in want. Both locks held.
func (w *watch) unsubscribeExcept(want map[*slot]struct{}) {
	if w.wildcard {
		for sl := range w.named {
			if _, ok := want[sl]; !ok {
				w.unsubscribe(sl)
			}
		}
		return
	}
	for sl := range w.held.all(w.t) {
		if _, ok := want[sl]; !ok {
			w.unsubscribe(sl)
		}
	}
}

// ackSotW records an ACK or NACK of the latest response of the type; a
// request carrying an older nonce is stale and changes nothing here.
// client.mu held.
func (w *watch) ackSotW(req *discoveryv3.DiscoveryRequest) {
	n := req.GetResponseNonce()
	if n == "" || n != w.lastNonce {
		return
	}
	if req.GetErrorDetail() != nil {
		w.recordNACK(w.lastVersion, n, req.GetErrorDetail().GetMessage())
		return
	}
	w.acked = req.GetVersionInfo()
}

// onDelta handles one delta request; fixed is the type of a per-type stream.
func (s *Server) onDelta(c *client, fixed string, req *discoveryv3.DeltaDiscoveryRequest) {
	typ := s.typeOf(c, fixed, req)
	if typ == "" {
		return
	}
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil && w.started && len(sub) == 0 && len(unsub) == 0 {
		w.ackDelta(req)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()

	now := time.Now()
	if w = s.lock(c, typ, req); w == nil {
		return
	}
	defer s.unlock(c)
	t := w.t
	if !w.started {
		w.started = true
		s.firstDelta(w, req, now)
		c.poke()
		return
	}
	// Envoy folds a pending ACK/NACK into its next subscription change;
	// a nonce that is not the latest one records nothing but a NACK.
	w.ackDelta(req)
	if slices.Contains(sub, "*") {
		w.setWildcard(true, now)
	}
	if slices.Contains(unsub, "*") {
		w.setWildcard(false, now)
	}
	for _, n := range unsub {
		if sl := t.slots[n]; sl != nil && n != "*" && w.explicit(sl) {
			w.unsubscribe(sl)
		}
	}
	for _, n := range sub {
		if n == "*" {
			continue
		}
		sl := t.get(n)
		if w.explicit(sl) {
			// A re-subscription asks for the resource again.
			if e := c.visible(sl.cur); e != nil {
				w.mark(sl, e, true)
			}
			continue
		}
		w.subscribe(sl, now)
	}
	c.poke()
}

// firstDelta sets up a new delta watch: what the client already holds
// (initial_resource_versions, within its subscription) counts as sent, so a
// reconnect with nothing changed sends nothing, also to another replica,
// because versions are content hashes. Both locks held.
func (s *Server) firstDelta(w *watch, req *discoveryv3.DeltaDiscoveryRequest, now time.Time) {
	t, c := w.t, w.c
	sub := req.GetResourceNamesSubscribe()
	wild := slices.Contains(sub, "*") || (len(sub) == 0 && t.full)
	initial := req.GetInitialResourceVersions()
	for name, ver := range initial {
		if !wild && !slices.Contains(sub, name) {
			continue
		}
		sl := t.get(name)
		sl.tomb = true // held by this watch even if it never existed here
		if e := c.visible(sl.cur); e != nil && e.version == ver {
			w.held.put(sl, e, t.total())
		} else {
			w.held.put(sl, stale, t.total())
		}
	}
	if wild {
		w.setWildcard(true, now)
		w.named = make(map[*slot]struct{}) // claimed names are not explicit
		w.initial = len(initial) == 0
	}
	for _, n := range sub {
		if n != "*" {
			w.subscribe(t.get(n), now)
		}
	}
	// Explicit names whose claimed version is gone here are removed.
	for sl, h := range w.held.all(t) {
		if h == stale && c.visible(sl.cur) == nil {
			w.mark(sl, nil, false)
		}
	}
}

// ackDelta records an ACK or NACK. client.mu held.
func (w *watch) ackDelta(req *discoveryv3.DeltaDiscoveryRequest) {
	n := req.GetResponseNonce()
	if n == "" {
		return
	}
	ver := ""
	if n == w.lastNonce {
		ver = w.lastVersion
	}
	if req.GetErrorDetail() != nil {
		w.recordNACK(ver, n, req.GetErrorDetail().GetMessage())
		return
	}
	if ver != "" {
		w.acked = ver
	}
}

// recordNACK keeps the rejection for the admin API, logs it once and counts
// it. The rejected content stays recorded as held, so it is not re-sent to
// this client; the next different version is. client.mu held.
func (w *watch) recordNACK(version, nonce, msg string) {
	n := 1
	if w.nack != nil {
		n = w.nack.Count + 1
	}
	w.nack = &NACKStatus{Version: version, Nonce: nonce, Error: msg, At: time.Now(), Count: n}
	w.t.m.nacks.Inc()
	w.c.s.log.Warn("client rejected a response", "client", w.c.id(), "type", w.t.url, "version", version, "nonce", nonce, "error", msg)
}
