package xds

import (
	"iter"
	"slices"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
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
		if !wild {
			if r := w.pin(sl); r != nil {
				return r
			}
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

// initialVersions are a delta request's initial_resource_versions: its map,
// or the records Codec kept (see above).
type initialVersions struct {
	m   map[string]string
	raw string // records checked by simpleEntries
	n   int    // records in raw
}

func initialOf(req *discoveryv3.DeltaDiscoveryRequest, in *inbound) initialVersions {
	if in != nil && in.initial != "" {
		return initialVersions{raw: in.initial, n: in.initialN}
	}
	return initialVersions{m: req.GetInitialResourceVersions()}
}

// len is the number of entries (records when raw: a repeated name counts
// each time).
func (v initialVersions) len() int {
	if v.m != nil {
		return len(v.m)
	}
	return v.n
}

// all yields each name and version; from raw, substrings of it, in wire
// order, a repeated name as often as it comes (the last one counts, as in
// a map).
func (v initialVersions) all() iter.Seq2[string, string] {
	if v.m != nil {
		return func(yield func(string, string) bool) {
			for k, ver := range v.m {
				if !yield(k, ver) {
					return
				}
			}
		}
	}
	return func(yield func(string, string) bool) {
		raw := v.raw
		for off := 0; off < len(raw); {
			l, n := uvarint(raw, off+1)
			kv, end := off+1+n, off+1+n+int(l)
			var key, ver string
			for i := kv; i < end; {
				vl, vn := uvarint(raw, i+1)
				s := raw[i+1+vn : i+1+vn+int(vl)]
				if raw[i] == tagEntryKey {
					key = s
				} else {
					ver = s
				}
				i += 1 + vn + int(vl)
			}
			if !yield(key, ver) {
				return
			}
			off = end
		}
	}
}

// lookup returns the entries as a map, for looking names up: the map
// itself, or one built from raw whose strings share raw's bytes.
func (v initialVersions) lookup() map[string]string {
	if v.m != nil {
		return v.m
	}
	m := make(map[string]string, v.n)
	for k, ver := range v.all() {
		m[k] = ver
	}
	return m
}

// uvarint decodes the varint at s[i:], already checked well formed, and
// returns it with its length.
func uvarint(s string, i int) (uint64, int) {
	var v uint64
	for n := 0; ; n++ {
		b := s[i+n]
		v |= uint64(b&0x7f) << (7 * n)
		if b < 0x80 {
			return v, n + 1
		}
	}
}
