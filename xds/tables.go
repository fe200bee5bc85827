package xds

import (
	"slices"
)

// chunk returns the published chunk k of the type's current entries, nil
// when none of its slots has one.
func (t *chunkTables) chunk(k int) *sentChunk {
	tab := t.table.Load()
	if tab == nil || k >= len(*tab) {
		return nil
	}
	return (*tab)[k]
}

// chunkIn is chunk k of scope id's table (the type's own for id 0): nil
// when none of its slots has an entry in the scope.
func (t *chunkTables) chunkIn(id, k int) *sentChunk {
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
// (for scope 0, the size of the slot table), which sizes a watch's sent
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

// touchChunk notes that slot index i's current entry changed: its chunk
// is to be published again, and the frames are out of date. Server.mu
// held.
func (t *chunkTables) touchChunk(i int) {
	clear(t.cachedFrames)
	t.touched = append(t.touched, i>>chunkBits)
}

// publishChunks rebuilds the touched chunks of the type's table and of
// every scope's and publishes them. Server.mu held.
func (t *typeState) publishChunks() {
	if len(t.touched) == 0 {
		return
	}
	n := (t.byIdx.span() + chunkLen - 1) / chunkLen
	var tab []*sentChunk
	if old := t.table.Load(); old != nil {
		tab = *old
	}
	tab = resized(tab, n)
	st := &scopeTables{}
	if ids := t.seen.maxID(); ids > 0 {
		st.chunks, st.count = make([][]*sentChunk, ids+1), make([]int, ids+1)
		old := t.scoped.Load()
		for id := 1; id <= ids; id++ {
			var prev []*sentChunk
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

// buildChunk is chunk k of scope id's table. Server.mu held.
func (t *typeState) buildChunk(k, id int) *sentChunk {
	page := t.byIdx.page(k)
	if page == nil {
		return nil
	}
	var c *sentChunk
	for j, sl := range page {
		if sl == nil || sl.cur == nil || !sl.cur.inScope(id) {
			continue
		}
		if c == nil {
			c = &sentChunk{shared: true, plain: true, none: &sentChunk{shared: true}}
		}
		e := sl.cur
		c.e[j], c.none.e[j] = e, none
		c.mask |= 1 << j
		c.plain = c.plain && !e.grpcOnly && e.grpc == nil
	}
	return c
}

// frame returns the type's current frame as scope id's wildcard sees it
// (id 0: every entry), building it when the type changed since the last
// one. Clients of one scope share it. Server.mu held.
func (t *typeState) frame(id int) *frame {
	if id < len(t.cachedFrames) && t.cachedFrames[id] != nil {
		return t.cachedFrames[id]
	}
	f := &frame{}
	if id == 0 {
		if tab := t.table.Load(); tab != nil {
			f.tab = *tab
		}
	} else if st := t.scoped.Load(); st != nil && id < len(st.chunks) {
		f.tab = st.chunks[id]
	}
	for i, sl := range t.byIdx.all() {
		if sl.cur != nil && sl.cur.inScope(id) {
			if len(f.slots) == 0 || f.slots[len(f.slots)-1].idx>>chunkBits != i>>chunkBits {
				f.starts = append(f.starts, len(f.slots))
			}
			f.slots = append(f.slots, sl)
			f.entries = append(f.entries, sl.cur)
		}
	}
	if id >= len(t.cachedFrames) {
		t.cachedFrames = append(t.cachedFrames, make([]*frame, id+1-len(t.cachedFrames))...)
	}
	t.cachedFrames[id] = f
	return f
}

// refers reports whether the type's entries may send traffic to clusters
// (refs.go): each must pass the make-before-break gate, so a scan of the
// type compares them one by one, never a chunk at a time.
func (t *typeState) refers() bool { return t.url == RouteType || t.url == ListenerType }
