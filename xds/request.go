package xds

import (
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
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
// else the request's type_url, which ADS requires.
func typeOf(fixed string, req request) (string, *refusal) {
	if fixed != "" {
		return fixed, nil
	}
	if typ := req.GetTypeUrl(); typ != "" {
		return typ, nil
	}
	return "", newRefusal(reasonNoTypeURL, codes.InvalidArgument, "type_url is required on an aggregated stream")
}

// lock takes Server.mu and client.mu for a subscription change, records the
// client's node and returns its watch of typ; release both with unlock. It
// returns nil, with nothing held, when the client has disconnected or is
// refused (then with the refusal).
func (s *Server) lock(c *client, typ string, req request) (*watch, *refusal) {
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil, nil
	}
	t, r := s.storeFor(c, typ)
	if r != nil {
		s.mu.Unlock()
		return nil, r
	}
	c.mu.Lock()
	c.identify(req.GetNode())
	w := c.watchFor(t)
	if len(w.pins) > 0 {
		w.sweep()
	}
	return w, nil
}

// unlock releases what lock took.
func (s *Server) unlock(c *client) {
	c.mu.Unlock()
	s.mu.Unlock()
}

// onSotW handles one SotW request; fixed is the type of a per-type stream.
func (s *Server) onSotW(c *client, fixed string, req *discoveryv3.DiscoveryRequest) {
	if r := s.sotw(c, fixed, req); r != nil {
		s.endStream(c, r)
	}
}

func (s *Server) sotw(c *client, fixed string, req *discoveryv3.DiscoveryRequest) *refusal {
	typ, r := typeOf(fixed, req)
	if r != nil {
		return r
	}
	names := req.GetResourceNames()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil {
		w.ackSotW(req)
		if w.started && len(names) > 0 && len(names) == len(w.lastNames) && &names[0] == &w.lastNames[0] {
			c.mu.Unlock()
			return nil // fastest path: the very same shared list (see Codec)
		}
	}
	c.mu.Unlock()
	if r := s.checkNames("resource_names", len(names)); r != nil {
		return r
	}
	h := hashNames(names)
	c.mu.Lock()
	if w != nil && w.started && h == w.namesHash {
		w.lastNames = nil
		if isShared(names) {
			w.lastNames = names
		}
		c.mu.Unlock()
		return nil // fast path: an ACK/NACK with an unchanged subscription
	}
	c.mu.Unlock()

	now := time.Now()
	w, r = s.lock(c, typ, req)
	if w == nil {
		return r
	}
	defer s.unlock(c)
	t := w.t
	first := !w.started
	w.started, w.namesHash, w.lastNames = true, h, nil
	if isShared(names) {
		w.lastNames = names
	}

	// An empty list is the legacy wildcard for CDS/LDS as long as the
	// client never named anything (not even "*"); after that it
	// unsubscribes from everything.
	wild := slices.Contains(names, "*") || (len(names) == 0 && t.full && !w.everNamed)
	w.everNamed = w.everNamed || len(names) > 0
	if n, max := len(names), s.opts.Limits.NamesPerSubscription; n > max {
		return newRefusal(reasonNamesPerSub, codes.ResourceExhausted,
			"subscribing to %d names, more than the %d allowed per type", n, max)
	}
	want := make(map[*slot]struct{}, len(names))
	slots := t.lookup(names)
	for i, n := range names {
		if n != "*" {
			sl := t.slotOf(slots, names, i)
			want[sl] = struct{}{}
			if r := w.pin(sl); r != nil {
				return r
			}
		}
	}
	w.unsubscribeExcept(want)
	w.setWildcard(wild, now)
	bulk := w.bulk(len(want))
	for sl := range want {
		if !w.explicit(sl) {
			w.subscribe(sl, now, bulk)
		}
	}
	if bulk {
		w.rescan()
	}
	// A type the server does not serve is answered at once, empty; its
	// names are answered as absent like any unknown name.
	if first && (wild || (w.private() && len(want) == 0)) {
		w.firstOwed = true
	}
	c.poke()
	return nil
}

// private reports whether the watch is of a type the server does not serve:
// its first request is answered, empty, at once.
func (w *watch) private() bool { return w.c.private[w.t.url] == w.t }

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
	for sl := range w.held.all() {
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

// onDelta handles one delta request; fixed is the type of a per-type
// stream. in is what the stream's reader received the request into, which
// may hold its initial versions (nil: decoded otherwise).
func (s *Server) onDelta(c *client, fixed string, req *discoveryv3.DeltaDiscoveryRequest, in *inbound) {
	if r := s.delta(c, fixed, req, initialOf(req, in)); r != nil {
		s.endStream(c, r)
	}
}

func (s *Server) delta(c *client, fixed string, req *discoveryv3.DeltaDiscoveryRequest, initial initialVersions) *refusal {
	typ, r := typeOf(fixed, req)
	if r != nil {
		return r
	}
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil && w.started && len(sub) == 0 && len(unsub) == 0 {
		w.ackDelta(req)
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	for _, l := range []struct {
		field string
		n     int
	}{
		{"resource_names_subscribe", len(sub)},
		{"resource_names_unsubscribe", len(unsub)},
		{"initial_resource_versions", initial.len()},
	} {
		if r := s.checkNames(l.field, l.n); r != nil {
			return r
		}
	}

	now := time.Now()
	w, r = s.lock(c, typ, req)
	if w == nil {
		return r
	}
	defer s.unlock(c)
	t := w.t
	if !w.started {
		w.started = true
		if r := s.firstDelta(w, req, initial, now); r != nil {
			return r
		}
		c.poke()
		return nil
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
			if r := w.unsubscribeDelta(sl); r != nil {
				return r
			}
		}
	}
	for _, n := range sub {
		if n == "*" {
			continue
		}
		sl := t.get(n)
		if r := w.pin(sl); r != nil {
			return r
		}
		if !w.explicit(sl) {
			if r := w.subscribeChecked(sl, now, false); r != nil {
				return r
			}
		}
		// Every subscription is answered, also of a name the client holds
		// or was told is removed: the resource again, or its removal.
		if e := c.visible(sl.cur); e != nil {
			w.mark(sl, e, true)
		} else {
			w.reconcile(sl, now)
		}
	}
	c.poke()
	return nil
}

// subscribeChecked subscribes to sl within Limits.NamesPerSubscription.
// Both locks held.
func (w *watch) subscribeChecked(sl *slot, now time.Time, bulk bool) *refusal {
	if max := w.c.s.opts.Limits.NamesPerSubscription; !w.explicit(sl) && w.explicitCount() >= max {
		return newRefusal(reasonNamesPerSub, codes.ResourceExhausted,
			"subscribing to more than the %d names allowed per type", max)
	}
	w.subscribe(sl, now, bulk)
	return nil
}

// explicitCount is the number of names subscribed by name. client.mu held.
func (w *watch) explicitCount() int {
	if w.wildcard {
		return len(w.named)
	}
	return w.held.len()
}

// unsubscribeDelta drops an explicit name. Under a wildcard subscription
// the client is told what the wildcard alone gives it: the resource again,
// or its removal. Both locks held.
func (w *watch) unsubscribeDelta(sl *slot) *refusal {
	if !w.wildcard {
		w.unsubscribe(sl)
		return nil
	}
	if r := w.pin(sl); r != nil { // kept until the removal is sent
		return r
	}
	w.unsubscribe(sl)
	if e := w.c.visible(sl.cur); e != nil {
		w.mark(sl, e, true)
		return nil
	}
	w.held.put(sl, stale)
	w.mark(sl, nil, false)
	return nil
}

// firstDelta sets up a new delta watch: what the client already holds
// (initial_resource_versions, within its subscription) counts as sent, so a
// reconnect with nothing changed sends nothing, also to another replica,
// because versions are content hashes. It costs O(names) under the locks:
// a reconnect of 20,000 names must not stall every other client's pushes.
// A claimed name the server does not have becomes a pinned slot, freed
// with the stream at the latest. Both locks held.
func (s *Server) firstDelta(w *watch, req *discoveryv3.DeltaDiscoveryRequest, initial initialVersions, now time.Time) *refusal {
	t, c := w.t, w.c
	sub := req.GetResourceNamesSubscribe()
	wild := slices.Contains(sub, "*") || (len(sub) == 0 && t.full)
	claim := func(name, ver string) *refusal {
		sl := t.slots[name]
		if sl != nil {
			if e := c.visible(sl.cur); e != nil && e.version == ver {
				w.held.put(sl, e)
				return nil
			}
		} else {
			// A copy: name may be a substring of the whole request
			// (initialVersions), which the slot must not keep alive.
			sl = t.get(strings.Clone(name))
		}
		if r := w.pin(sl); r != nil {
			return r
		}
		w.held.put(sl, stale)
		return nil
	}
	w.held.reserveDense(initial.len()) // a reconnect's claims: dense at once
	if wild {
		for name, ver := range initial.all() {
			if r := claim(name, ver); r != nil {
				return r
			}
		}
	} else if initial.len() > 0 {
		claimed := initial.lookup()
		for _, name := range sub {
			if ver, ok := claimed[name]; ok {
				if r := claim(name, ver); r != nil {
					return r
				}
			}
		}
	}
	if wild {
		w.named = make(map[*slot]struct{}) // claimed names are not explicit
		w.wildcardOn(now)
		w.firstOwed = initial.len() == 0
	}
	if w.private() && len(sub) == 0 {
		w.firstOwed = true
	}
	bulk := w.bulk(len(sub))
	slots := t.lookup(sub)
	var claimed [][2]int
	if bulk && slots != nil && w.held.len()+len(slots) <= s.opts.Limits.NamesPerSubscription {
		claimed = w.claimChunks(slots) // no name can breach the limit
	}
	for i := 0; i < len(sub); i++ {
		if len(claimed) > 0 && claimed[0][0] == i {
			i, claimed = claimed[0][1]-1, claimed[1:]
			continue // subscribed a chunk at a time
		}
		n := sub[i]
		if n == "*" {
			continue
		}
		sl := t.slotOf(slots, sub, i)
		if r := w.pin(sl); r != nil {
			return r
		}
		if r := w.subscribeChecked(sl, now, bulk); r != nil {
			return r
		}
	}
	if bulk {
		w.rescan()
	}
	// Explicit names whose claimed version is gone here are removed.
	for sl, h := range w.held.all() {
		if h == stale && c.visible(sl.cur) == nil {
			w.mark(sl, nil, false)
		}
	}
	return nil
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
