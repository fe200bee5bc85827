package xds

import (
	"iter"
	"math/bits"
	"slices"
	"sync/atomic"
)

// heldSet is what a watch holds, per slot: absent, present without an entry
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
type heldSet struct {
	t *typeState
	// scope is the client's scope ID: its chunks are shared with the
	// scope's table (see typeState.chunkIn).
	scope int
	m     map[*slot]*entry
	dense []*heldChunk // by slot.idx/chunkLen; nil = every slot absent
	n     int          // present slots, in dense mode
}

const (
	chunkBits = 6
	chunkLen  = 1 << chunkBits
)

// heldChunk is the held entries of chunkLen consecutive slots: nil = absent,
// none = present without an entry. A shared chunk belongs to a type's chunk
// table and is never written again.
type heldChunk struct {
	e      [chunkLen]*entry
	shared bool
	// Set on a type's table chunks only, when published. plain: none of
	// its entries is gRPC-only or has a gRPC variant, so a client not
	// served a Rewrite is sent the entries themselves. mask: bit j set
	// where it has an entry. none: its twin, present without an entry
	// wherever it has one, which a watch subscribing to all of the chunk
	// holds until the entries are sent (see scan.go).
	plain bool
	mask  uint64
	none  *heldChunk
	// recs are the chunk's SotW records, built on first use (records).
	recs atomic.Pointer[chunkRecords]
}

// none marks a present slot without an entry in dense mode.
var none = &entry{}

// reserveDense takes the dense form for a watch holding, or about to hold,
// n of the type's slots: at least 64 covering at least a quarter of them.
// Taken at once for a bulk subscription, since growing a map to a quarter
// of a large type first costs more than the whole subscription.
func (h *heldSet) reserveDense(n int) {
	if h.dense != nil || n < 64 || 4*n < h.t.population(h.scope) {
		return
	}
	total := h.t.total()
	h.dense = make([]*heldChunk, (total+chunkLen-1)/chunkLen)
	for sl, e := range h.m {
		if e == nil {
			e = none
		}
		h.set(sl.idx, e)
	}
	h.m = nil
}

func (h *heldSet) get(sl *slot) (*entry, bool) {
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

func (h *heldSet) has(sl *slot) bool {
	_, ok := h.get(sl)
	return ok
}

// put records e (nil: present without an entry).
func (h *heldSet) put(sl *slot, e *entry) {
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

func (h *heldSet) del(sl *slot) {
	if h.dense == nil {
		delete(h.m, sl)
		return
	}
	h.set(sl.idx, nil)
}

// set writes v (nil, none or an entry) at slot index i of the dense form,
// sharing the type's chunk when the write makes this chunk equal to it.
func (h *heldSet) set(i int, v *entry) {
	k, j := i>>chunkBits, i&(chunkLen-1)
	if k >= len(h.dense) {
		if v == nil {
			return
		}
		h.dense = append(h.dense, make([]*heldChunk, k+1-len(h.dense)+len(h.dense)/4)...)
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
		own := &heldChunk{}
		if c != nil {
			own.e = c.e
		}
		c, h.dense[k] = own, own
	}
	c.e[j] = v
}

// at is the entry at j of a chunk, nil for a nil chunk.
func (c *heldChunk) at(j int) *entry {
	if c == nil {
		return nil
	}
	return c.e[j]
}

// equalBut reports whether c and d (either nil for all absent) hold the
// same at every index but j. It compares from j+1 onwards, wrapping round:
// a chunk being filled in index order differs right there, so the common
// case stops at the first comparison.
func (c *heldChunk) equalBut(d *heldChunk, j int) bool {
	if c == d {
		return true
	}
	for n := 1; n < chunkLen; n++ {
		i := (j + n) & (chunkLen - 1)
		if c.at(i) != d.at(i) {
			return false
		}
	}
	return true
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
func (h *heldSet) all() iter.Seq2[*slot, *entry] {
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
				if !yield(h.t.byIdx[k<<chunkBits|j], e) {
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
func (h *heldSet) subscribeChunk(k int, tc *heldChunk, rewritten bool) bool {
	if rewritten || tc == nil || !tc.plain || h.dense == nil || k >= len(h.dense) || h.dense[k] != nil {
		return false
	}
	h.n += bits.OnesCount64(tc.mask)
	h.dense[k] = tc.none
	return true
}

// claimChunks subscribes the watch to the slots of a bulk request (in the
// request's order) a chunk at a time where it can: wherever the slots of
// one chunk of the type, consecutive in slots, are exactly the chunk's
// slots with an entry, the chunk's entries are sent as they are (plain,
// no Rewrite: nothing for settle to do), and the watch holds nothing of
// the chunk, the watch takes the chunk's shared twin and each slot gets
// the watch as a subscriber: what subscribe would have done name by name,
// without a held-set write, pin or settle per name. It returns the ranges
// of slots it subscribed, in order; the caller subscribes the rest. It
// counts nothing against a limit: the caller must know that none can be
// breached. Both locks held.
func (w *watch) claimChunks(slots []*slot) (done [][2]int) {
	h := &w.held
	if h.dense == nil || w.wildcard || w.c.rewrite != nil {
		return nil
	}
	for i := 0; i < len(slots); {
		k := slots[i].idx >> chunkBits
		tc := w.t.chunkIn(w.c.scope, k)
		ok := tc != nil && tc.plain && k < len(h.dense) && h.dense[k] == nil
		var seen uint64
		j := i
		for ; j < len(slots) && slots[j].idx>>chunkBits == k; j++ {
			b := uint64(1) << (slots[j].idx & (chunkLen - 1))
			ok = ok && seen&b == 0 && tc.e[slots[j].idx&(chunkLen-1)] != nil
			seen |= b
		}
		if ok && tc.mask == seen {
			h.dense[k] = tc.none
			h.n += j - i
			for _, sl := range slots[i:j] {
				sl.subs.add(w.idx)
			}
			done = append(done, [2]int{i, j})
		}
		i = j
	}
	return done
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

// scopeTables are the published tables of the scopes, by scope ID (index
// 0 unused: the type's own table), with the number of entries in each.
type scopeTables struct {
	chunks [][]*heldChunk
	count  []int
}

// chunk returns the published chunk k of the type's current entries, nil
// when none of its slots has one.
func (t *typeState) chunk(k int) *heldChunk {
	tab := t.table.Load()
	if tab == nil || k >= len(*tab) {
		return nil
	}
	return (*tab)[k]
}

// chunkIn is chunk k of scope id's table (the type's own for id 0): nil
// when none of its slots has an entry in the scope.
func (t *typeState) chunkIn(id, k int) *heldChunk {
	if id == 0 {
		return t.chunk(k)
	}
	st := t.scoped.Load()
	if st == nil || id >= len(st.chunks) || k >= len(st.chunks[id]) {
		return nil
	}
	return st.chunks[id][k]
}

// population is the number of resources a wildcard of scope id delivers
// (for scope 0, the size of the slot table), which sizes a watch's held
// set: a client of a scope holding most of its scope is dense like an
// unscoped client holding most of the type.
func (t *typeState) population(id int) int {
	if id == 0 {
		return t.total()
	}
	if st := t.scoped.Load(); st != nil && id < len(st.count) {
		return st.count[id]
	}
	return 0
}

// touchChunk notes that slot index i's current entry changed. Server.mu
// held.
func (t *typeState) touchChunk(i int) {
	t.touched = append(t.touched, i>>chunkBits)
}

// publishChunks rebuilds the touched chunks of the type's table and of
// every scope's and publishes them. Server.mu held.
func (t *typeState) publishChunks() {
	if len(t.touched) == 0 {
		return
	}
	n := (len(t.byIdx) + chunkLen - 1) / chunkLen
	var tab []*heldChunk
	if old := t.table.Load(); old != nil {
		tab = *old
	}
	tab = resized(tab, n)
	st := &scopeTables{}
	if ids := t.seen.maxID(); ids > 0 {
		st.chunks, st.count = make([][]*heldChunk, ids+1), make([]int, ids+1)
		old := t.scoped.Load()
		for id := 1; id <= ids; id++ {
			var prev []*heldChunk
			if old != nil && id < len(old.chunks) {
				prev, st.count[id] = old.chunks[id], old.count[id]
			}
			st.chunks[id] = resized(prev, n)
		}
	}
	slices.Sort(t.touched)
	for _, k := range slices.Compact(t.touched) {
		if k >= n {
			continue
		}
		tab[k] = t.buildChunk(k, 0)
		for id := 1; id < len(st.chunks); id++ {
			st.count[id] -= st.chunks[id][k].count()
			st.chunks[id][k] = t.buildChunk(k, id)
			st.count[id] += st.chunks[id][k].count()
		}
	}
	t.touched = t.touched[:0]
	if cap(t.touched) > 4096 {
		t.touched = nil // a burst's: kept, it would be as large as the type
	}
	t.scoped.Store(st)
	t.table.Store(&tab)
}

// resized is a copy of tab with n chunks.
func resized(tab []*heldChunk, n int) []*heldChunk {
	tab = slices.Clone(tab)
	if n > len(tab) {
		return append(tab, make([]*heldChunk, n-len(tab))...)
	}
	clear(tab[n:])
	return tab[:n]
}

// buildChunk is chunk k of scope id's table. Server.mu held.
func (t *typeState) buildChunk(k, id int) *heldChunk {
	var c *heldChunk
	for j := range chunkLen {
		i := k<<chunkBits | j
		if i >= len(t.byIdx) || t.byIdx[i] == nil || t.byIdx[i].cur == nil || !t.byIdx[i].cur.inScope(id) {
			continue
		}
		if c == nil {
			c = &heldChunk{shared: true, plain: true, none: &heldChunk{shared: true}}
		}
		e := t.byIdx[i].cur
		c.e[j], c.none.e[j] = e, none
		c.mask |= 1 << j
		c.plain = c.plain && !e.grpcOnly && e.grpc == nil
	}
	return c
}

// count is the number of entries of a table chunk (nil: none).
func (c *heldChunk) count() int {
	if c == nil {
		return 0
	}
	return bits.OnesCount64(c.mask)
}
