package xds

import "iter"

// heldSet is what a watch holds, per slot: absent, present without an entry
// (subscribed, nothing sent yet), or the entry last sent. Sparse watches (a
// gRPC client naming one cluster) use a map; a watch that covers a good part
// of its type (an Envoy with wildcard CDS and EDS for every cluster) switches
// to a slice indexed by slot.idx: 8 bytes per resource of the type instead
// of ~35 bytes per held resource in a map, which is most of the engine's
// memory per client. Guarded by client.mu.
type heldSet struct {
	m     map[*slot]*entry
	dense []*entry // by slot.idx; nil = absent, none = present without entry
	n     int      // present slots, in dense mode
}

// none marks a present slot without an entry in dense mode.
var none = &entry{}

// densify is when a map switches to a slice: at least 64 entries covering
// at least a quarter of the type's slots.
func (h *heldSet) maybeDensify(total int) { h.reserve(len(h.m), total) }

// reserve takes the dense form at once for a watch about to hold n of the
// type's total slots, when it would reach it anyway: growing a map to a
// quarter of a large type first costs more than the whole subscription.
func (h *heldSet) reserve(n, total int) {
	if h.dense != nil || n < 64 || 4*n < total {
		return
	}
	h.dense = make([]*entry, total)
	for sl, e := range h.m {
		h.putDense(sl, e)
	}
	h.m = nil
}

func (h *heldSet) get(sl *slot) (*entry, bool) {
	if h.dense == nil {
		e, ok := h.m[sl]
		return e, ok
	}
	if sl.idx >= len(h.dense) || h.dense[sl.idx] == nil {
		return nil, false
	}
	if e := h.dense[sl.idx]; e != none {
		return e, true
	}
	return nil, true
}

func (h *heldSet) has(sl *slot) bool {
	_, ok := h.get(sl)
	return ok
}

// put records e (nil: present without an entry); total is the number of
// slots of the type, to decide on the dense form.
func (h *heldSet) put(sl *slot, e *entry, total int) {
	if h.dense == nil {
		if h.m == nil {
			h.m = make(map[*slot]*entry)
		}
		h.m[sl] = e
		h.maybeDensify(total)
		return
	}
	h.putDense(sl, e)
}

func (h *heldSet) putDense(sl *slot, e *entry) {
	if e == nil {
		e = none
	}
	if sl.idx >= len(h.dense) {
		h.dense = append(h.dense, make([]*entry, sl.idx+1-len(h.dense)+len(h.dense)/4)...)
	}
	if h.dense[sl.idx] == nil {
		h.n++
	}
	h.dense[sl.idx] = e
}

func (h *heldSet) del(sl *slot) {
	if h.dense == nil {
		delete(h.m, sl)
		return
	}
	if sl.idx < len(h.dense) && h.dense[sl.idx] != nil {
		h.dense[sl.idx] = nil
		h.n--
	}
}

func (h *heldSet) len() int {
	if h.dense == nil {
		return len(h.m)
	}
	return h.n
}

// entries yields the entries held (not the present-without-entry slots).
// It needs only client.mu.
func (h *heldSet) entries() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		if h.dense == nil {
			for _, e := range h.m {
				if e != nil && !yield(e) {
					return
				}
			}
			return
		}
		for _, e := range h.dense {
			if e != nil && e != none && !yield(e) {
				return
			}
		}
	}
}

// all yields every present slot with its entry (nil if none); deleting the
// current slot while iterating is allowed. It reads the type's slot table,
// so Server.mu must be held too.
func (h *heldSet) all(t *typeState) iter.Seq2[*slot, *entry] {
	return func(yield func(*slot, *entry) bool) {
		if h.dense == nil {
			for sl, e := range h.m {
				if !yield(sl, e) {
					return
				}
			}
			return
		}
		for i, e := range h.dense {
			if e == nil {
				continue
			}
			if e == none {
				e = nil
			}
			if !yield(t.byIdx[i], e) {
				return
			}
		}
	}
}
