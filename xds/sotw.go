package xds

import (
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
)

// onSotW handles one SotW request; fixed is the type of a per-type stream.
func (c *client) onSotW(fixed string, req *discoveryv3.DiscoveryRequest) {
	if r := c.sotwRequest(fixed, req); r != nil {
		c.refuse(r)
	}
}

func (c *client) sotwRequest(fixed string, req *discoveryv3.DiscoveryRequest) *refusal {
	typ, r := typeOf(fixed, req)
	if r != nil {
		return r
	}
	names := req.GetResourceNames()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil {
		w.answered(w.answerSotW(req))
		if w.sameList(names) {
			c.mu.Unlock()
			return nil // fastest path: the very same shared list (see Codec)
		}
	}
	c.mu.Unlock()
	if r := c.s.opts.Limits.checkNames("resource_names", len(names)); r != nil {
		return r
	}
	h := hashNames(names)
	c.mu.Lock()
	if w != nil && w.started && h == w.namesHash {
		w.remember(names, h)
		c.mu.Unlock()
		return nil // fast path: an ACK/NACK with an unchanged subscription
	}
	c.mu.Unlock()

	now := time.Now()
	w, r = c.lock(typ, req)
	if w == nil {
		return r
	}
	defer c.unlock()
	t := w.t
	first := !w.started
	w.started = true
	w.remember(names, h)

	// An empty list is the legacy wildcard for CDS/LDS as long as the
	// client never named anything (not even "*"); after that it
	// unsubscribes from everything.
	wild := slices.Contains(names, "*") || (len(names) == 0 && t.full && !w.everNamed)
	w.everNamed = w.everNamed || len(names) > 0
	if n, limit := len(names), c.s.opts.Limits.NamesPerSubscription; n > limit {
		return newRefusal(reasonNamesPerSub, codes.ResourceExhausted,
			"subscribing to %d names, more than the %d allowed per type", n, limit)
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
	for sl := range w.sent.all() {
		if _, ok := want[sl]; !ok {
			w.unsubscribe(sl)
		}
	}
}
