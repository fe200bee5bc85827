package xds

import (
	"slices"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// onDelta handles one delta request; fixed is the type of a per-type
// stream. in is what the stream's reader received the request into, which
// may hold its initial versions (nil: decoded otherwise).
func (c *client) onDelta(fixed string, req *discoveryv3.DeltaDiscoveryRequest, in *wire.Inbound) {
	if r := c.deltaRequest(fixed, req, wire.InitialOf(req, in)); r != nil {
		c.refuse(r)
	}
}

func (c *client) deltaRequest(fixed string, req *discoveryv3.DeltaDiscoveryRequest, initial wire.InitialVersions) *refusal {
	typ, r := typeOf(fixed, req)
	if r != nil {
		return r
	}
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	c.mu.Lock()
	w := c.watches[typ]
	if w != nil && w.started && len(sub) == 0 && len(unsub) == 0 {
		w.answered(w.answerDelta(req))
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
		{"initial_resource_versions", initial.Len()},
	} {
		if r := c.s.opts.Limits.checkNames(l.field, l.n); r != nil {
			return r
		}
	}

	now := time.Now()
	w, r = c.lock(typ, req)
	if w == nil {
		return r
	}
	defer c.unlock()
	t := w.t
	if !w.started {
		w.started = true
		if r := c.firstDelta(w, req, initial, now); r != nil {
			return r
		}
		c.poke()
		return nil
	}
	// Envoy folds a pending ACK/NACK into its next subscription change;
	// a nonce that is not the latest one records nothing but a NACK.
	w.answered(w.answerDelta(req))
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
		if w.visible(sl, sl.cur) != nil {
			w.mark(sl, sl.cur, true)
		} else {
			w.reconcile(sl, now)
		}
	}
	c.poke()
	return nil
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
	if w.visible(sl, sl.cur) != nil {
		w.mark(sl, sl.cur, true)
		return nil
	}
	w.sent.put(sl, stale)
	w.mark(sl, nil, false)
	return nil
}
