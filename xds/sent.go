package xds

import (
	"iter"
	"math/bits"
)

// sentSet is what a watch's client was sent, per slot: absent, present without an entry
// (subscribed, nothing sent yet), or the entry last sent. Sparse watches (a
// gRPC client naming one cluster) use a map; a watch that covers a good part
// of its type (an Envoy with wildcard CDS and EDS for every cluster) switches
// to chunks of slots indexed by slot.idx.
//
// The chunks are shared. Most watches of a type hold what the type holds:
// every client that has been sent the current state has the same entries.
// So the type keeps its current entries in immutable chunks too (its chunk
// table, published after each Apply), and a watch whose chunk comes to equal
// the table's takes the table's chunk instead of keeping its own. A watch
// that is up to date costs one pointer per 64 resources of the type rather
// than 8 bytes per resource: a pointer per client and resource would be
// much of the server's live heap in a large fleet, all of it pointers for
// the collector to scan. A watch copies a shared chunk before it writes to it.
//
// Only a client served the entries themselves can share: a gRPC client of
// resources with a gRPC variant, a client of a non-ADS stream (altered
// copies), or one holding names the type does not have keeps chunks of
// its own, a pointer per slot of each chunk it holds.
// Guarded by client.mu.
type sentSet struct {
	t *typeState
	// scope is the client's scope ID: its chunks are shared with the
	// scope's table (see chunkTables.chunkIn).
	scope int
	m     map[*slot]*entry
	dense []*sentChunk // by slot.idx/chunkLen; nil = every slot absent
	n     int          // present slots, in dense mode
}

// reserveDense takes the dense form for a watch holding, or about to hold,
// n of the type's slots: at least 64 covering at least a quarter of them.
// Taken at once for a bulk subscription, since growing a map to a quarter
// of a large type first costs more than the whole subscription.
func (h *sentSet) reserveDense(n int) {
	if h.dense != nil || n < 64 || 4*n < h.t.population(h.scope) {
		return
	}
	total := h.t.total()
	h.dense = make([]*sentChunk, (total+chunkLen-1)/chunkLen)
	for sl, e := range h.m {
		if e == nil {
			e = none
		}
		h.set(sl.idx, e)
	}
	h.m = nil
}

func (h *sentSet) get(sl *slot) (*entry, bool) {
	if h.dense == nil {
		e, ok := h.m[sl]
		return e, ok
	}
	k := sl.idx >> chunkBits
	if k >= len(h.dense) || h.dense[k] == nil {
		return nil, false
	}
	switch e := h.dense[k].e[sl.idx&(chunkLen-1)]; e {
	case nil:
		return nil, false
	case none:
		return nil, true
	default:
		return e, true
	}
}

func (h *sentSet) has(sl *slot) bool {
	_, ok := h.get(sl)
	return ok
}

// put records e (nil: present without an entry).
func (h *sentSet) put(sl *slot, e *entry) {
	if h.dense == nil {
		if h.m == nil {
			h.m = make(map[*slot]*entry)
		}
		h.m[sl] = e
		h.reserveDense(len(h.m))
		return
	}
	if e == nil {
		e = none
	}
	h.set(sl.idx, e)
}

func (h *sentSet) del(sl *slot) {
	if h.dense == nil {
		delete(h.m, sl)
		return
	}
	h.set(sl.idx, nil)
}

// set writes v (nil, none or an entry) at slot index i of the dense form,
// sharing the type's chunk when the write makes this chunk equal to it.
func (h *sentSet) set(i int, v *entry) {
	k, j := i>>chunkBits, i&(chunkLen-1)
	if k >= len(h.dense) {
		if v == nil {
			return
		}
		h.dense = append(h.dense, make([]*sentChunk, k+1-len(h.dense)+len(h.dense)/4)...)
	}
	c := h.dense[k]
	var old *entry
	if c != nil {
		old = c.e[j]
	}
	if old == v {
		return
	}
	switch {
	case old == nil:
		h.n++
	case v == nil:
		h.n--
	}
	tc := h.t.chunkIn(h.scope, k)
	if tc.at(j) == v && c.equalBut(tc, j) {
		h.dense[k] = tc // nil when the type has nothing there either
		return
	}
	if c == nil || c.shared {
		own := &sentChunk{}
		if c != nil {
			own.e = c.e
		}
		c, h.dense[k] = own, own
	}
	c.e[j] = v
}

func (h *sentSet) len() int {
	if h.dense == nil {
		return len(h.m)
	}
	return h.n
}

// entries yields the entries held (not the present-without-entry slots).
// It needs only client.mu.
func (h *sentSet) entries() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		if h.dense == nil {
			for _, e := range h.m {
				if e != nil && !yield(e) {
					return
				}
			}
			return
		}
		for _, c := range h.dense {
			if c == nil {
				continue
			}
			for _, e := range c.e {
				if e != nil && e != none && !yield(e) {
					return
				}
			}
		}
	}
}

// all yields every present slot with its entry (nil if none); deleting the
// current slot while iterating is allowed. It reads the type's slot table,
// so Server.mu must be held too.
func (h *sentSet) all() iter.Seq2[*slot, *entry] {
	return func(yield func(*slot, *entry) bool) {
		if h.dense == nil {
			for sl, e := range h.m {
				if !yield(sl, e) {
					return
				}
			}
			return
		}
		for k := 0; k < len(h.dense); k++ {
			c := h.dense[k] // a delete may replace it; the rest is unchanged
			if c == nil {
				continue
			}
			for j, e := range c.e {
				if e == nil {
					continue
				}
				if e == none {
					e = nil
				}
				if !yield(h.t.byIdx.at(k<<chunkBits|j), e) {
					return
				}
			}
		}
	}
}

// subscribeChunk subscribes the watch to every slot of chunk tc (the
// type's current chunk k) without a word per slot, by taking tc's shared
// twin of present-without-entry slots, when the watch holds nothing of
// chunk k and is served tc's entries themselves (so the caller has nothing
// to settle). It reports whether it did.
func (h *sentSet) subscribeChunk(k int, tc *sentChunk, rewritten bool) bool {
	if rewritten || tc == nil || !tc.plain || h.dense == nil || k >= len(h.dense) || h.dense[k] != nil {
		return false
	}
	h.n += bits.OnesCount64(tc.mask)
	h.dense[k] = tc.none
	return true
}

// The type's chunk table: its slots' current entries, chunkLen slots a
// chunk, immutable once published. Apply marks the chunks of the slots it
// changes (Server.mu held) and publishes a new table before it marks any
// watch, so a writer sending a change finds the chunk it converges to.
// Writers read the table holding only client.mu.
//
// Each scope a resource is in (Resource.Scopes) has a table of its own,
// published with the type's: the entries a wildcard of that scope
// delivers. A client of a scope shares that table's chunks as an unscoped
// client shares the type's, so clients of one scope cost what clients
// without scopes do, and the tables cost a pointer per chunk and scope
// plus the chunks that hold something.
