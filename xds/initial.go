package xds

import (
	"slices"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// firstDelta sets up a new delta watch: what the client already holds
// (initial_resource_versions, within its subscription) counts as sent, so a
// reconnect with nothing changed sends nothing, also to another replica,
// because versions are content hashes. It costs O(names) under the locks:
// a reconnect listing every name of a large type must not stall every
// other client's pushes.
// A claimed name the server does not have gets a slot until the client is
// told of its removal: pinned, as an unknown name, when the client also
// subscribes to it by name; under a wildcard only owed its removal
// (wildcardOn marks it, see slot.owed), which is no subscription and does
// not count against Limits.UnknownNames: a reconnect after the store shrank
// claims many such names, as many as NamesPerRequest allows. Both locks
// held.
func (c *client) firstDelta(w *watch, req *discoveryv3.DeltaDiscoveryRequest, initial wire.InitialVersions, now time.Time) *refusal {
	t := w.t
	sub := req.GetResourceNamesSubscribe()
	wild := slices.Contains(sub, "*") || (len(sub) == 0 && t.full)
	claim := func(name, ver string) *refusal {
		sl := t.slots[name]
		if sl != nil {
			if e := c.visible(sl.cur); e != nil && e.version == ver {
				w.sent.put(sl, e)
				return nil
			}
		} else {
			// A copy: name may be a substring of the whole request
			// (initialVersions), which the slot must not keep alive.
			sl = t.get(strings.Clone(name))
		}
		if !wild {
			if r := w.pin(sl); r != nil {
				return r
			}
		}
		w.sent.put(sl, stale)
		return nil
	}
	w.sent.reserveDense(initial.Len()) // a reconnect's claims: dense at once
	if wild {
		for name, ver := range initial.All() {
			if r := claim(name, ver); r != nil {
				return r
			}
		}
	} else if initial.Len() > 0 {
		claimed := initial.Lookup()
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
		w.firstOwed = initial.Len() == 0
	}
	if w.private() && len(sub) == 0 {
		w.firstOwed = true
	}
	bulk := w.bulk(len(sub))
	slots := t.lookup(sub)
	var claimed [][2]int
	if bulk && slots != nil && w.sent.len()+len(slots) <= c.s.opts.Limits.NamesPerSubscription {
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
	for sl, h := range w.sent.all() {
		if h == stale && w.visible(sl, sl.cur) == nil {
			w.mark(sl, nil, false)
		}
	}
	return nil
}

// A reconnecting Envoy lists every resource it holds in
// initial_resource_versions, which proto decodes into a map of two strings
// per name: small allocations, several times the request's wire size, that
// the engine reads once, under its lock, and drops.
// For the engine's own streams Codec keeps the field's records as they
// came instead, one string, and the engine walks them in place
// (initialVersions); a request in any other form, or decoded by another
// codec, has its map as usual.
