package xds

import (
	"slices"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// A subscription that covers much of a type at once (a wildcard, an Envoy's
// first EDS request naming every cluster) would queue one pending entry per
// name in the watch's dirty map, whose inserts, growth and deletes would be
// most of the server's CPU for a client's initial state. Instead such a
// request queues a scan: the watch keeps a frame of the type (its entries
// at the moment of the request, immutable and shared by every watch that
// scans the same moment), and its writer walks the frame comparing each
// entry with what the client holds, a few loads per name and no allocation.
//
// Correctness rests on three rules. A change after the frame was taken is
// marked in the dirty map as always, so the dirty map is never older than
// the frame; hence the scan skips a name the dirty map has, and the scan
// runs to its end before the dirty map is drained, so an older frame entry
// is never sent after a newer one. Every request that queues a scan
// restarts it from the type's current frame, so names subscribed after an
// earlier frame are compared with their current entries. And the
// scan sends a frame entry only while it is still the current one, by the
// type's published chunk table: a name subscribed by a request that queues
// no scan, after a change the watch was not marked with, was compared with
// its current state by that request, and a pending scan must not send it
// the entry the change replaced (or removed).

// Comparing a watch's chunk with the frame's as a whole: a client's
// initial state (a wildcard, or every name of the type) is chunks the
// client is subscribed to and holds nothing of, and a reconnect's is
// chunks it holds already. Either is told from the two chunks, 64 slots
// at a time, and the first is sent as a run of the frame with the
// watch taking the frame's chunk, a few words per chunk instead of a
// comparison and a sent-set write per name.

type chunkFit int

const (
	perName  chunkFit = iota // compare name by name
	sentAll                  // the client was sent the frame's entries
	lacksAll                 // subscribed to all of them, holds none
)

// fit tells how the watch stands to the frame's chunk k, where that can be
// told from the chunks alone. client.mu held.
func (w *watch) fit(f *frame, k int) chunkFit {
	h := &w.sent
	if w.c.rewrite != nil || h.dense == nil || k >= len(h.dense) || k >= len(f.tab) {
		return perName
	}
	tc, hc := f.tab[k], h.dense[k]
	switch {
	case tc == nil || !tc.plain || hc == nil:
		return perName
	case hc == tc:
		return sentAll
	case tc != w.t.chunkIn(w.c.scope, k):
		return perName // changed since the frame (the third rule above)
	case w.dirtyIn(k):
		return perName // a pending change is newer than the frame
	case hc == tc.none:
		return lacksAll
	}
	for j, e := range tc.e {
		want := none
		if e == nil {
			want = nil // nothing else may be held: taking tc would drop it
		}
		if hc.e[j] != want {
			return perName
		}
	}
	return lacksAll
}

// bulk reports whether a request subscribing n names should queue a scan
// rather than compare name by name: a scan costs a few loads per resource
// of the type, a dirty entry some twenty times that.
// A bulk request also gives the sent set its dense form up front.
func (w *watch) bulk(n int) bool {
	if n < 64 || 4*n < w.t.population(w.c.scope) {
		return false
	}
	w.sent.reserveDense(n)
	return true
}

// scanned takes into ups (empty) the entries of the pending scan that the
// client lacks, while they fit (when split) in room, with the runs of the
// scan's frame among them. done is false when the scan stopped for room.
// client.mu held.
func (w *watch) scanned(ups []*entry, used, room int, split bool) (_ []*entry, _ int, _ *frame, runs []wire.Run, done bool) {
	f := w.scan
	b, _ := slices.BinarySearch(f.starts, w.scanAt) // the chunk at (or after) scanAt
	for ; w.scanAt < len(f.slots); w.scanAt++ {
		if b < len(f.starts) && f.starts[b] == w.scanAt && !w.t.refers() {
			at, end := w.scanAt, len(f.slots)
			if b++; b < len(f.starts) {
				end = f.starts[b]
			}
			k := f.slots[at].idx >> chunkBits
			switch w.fit(f, k) {
			case sentAll:
				w.scanAt = end - 1
				continue
			case lacksAll:
				recs := f.records(w.c.delta)
				n := recs.Off[end] - recs.Off[at]
				if split && used+n > room {
					break // compared name by name, up to the room left
				}
				used += n
				w.sent.dense[k] = f.tab[k] // each none becomes its entry: the count stands
				if len(w.waiting) > 0 {
					for _, sl := range f.slots[at:end] {
						delete(w.waiting, sl)
					}
				}
				runs = extendRun(runs, len(ups), at, end)
				ups = appendFrame(ups, f.entries, at, end)
				w.scanAt = end - 1
				continue
			}
		}
		sl := f.slots[w.scanAt]
		e := w.owes(f, w.scanAt)
		if e == nil {
			continue
		}
		if len(e.refs) > 0 && !w.c.ready(e) {
			w.dirty[sl] = pend{e: e} // sent by the dirty map once its clusters are ready (gate.go)
			continue
		}
		n := e.recLen(w.c.delta)
		if split && len(ups) > 0 && used+n > room {
			return ups, used, f, runs, false
		}
		used += n
		if w.c.member != nil {
			h, _ := w.sent.get(sl)
			w.noteSent(w.c.member, w.t.url, sl, h, e)
		}
		w.sent.put(sl, e)
		if len(w.waiting) > 0 {
			delete(w.waiting, sl)
		}
		if e == f.entries[w.scanAt] { // the client's shape is the entry itself
			runs = extendRun(runs, len(ups), w.scanAt, w.scanAt+1)
			ups = appendFrame(ups, f.entries, w.scanAt, w.scanAt+1)
			continue
		}
		if ups == nil {
			ups = make([]*entry, 0, len(f.slots)-w.scanAt)
		}
		ups = append(ups, e)
	}
	w.scan = nil
	return ups, used, f, runs, true
}

// appendFrame appends entries[at:end] to ups. A response that is one run of
// the frame (an initial state) is the frame's own list, resliced: a copy
// per client would be the scan's main cost, each pointer written with the
// collector's write barrier in a cold start. The slice is capped at its
// length, so an append to it copies and the frame is never written.
func appendFrame(ups, entries []*entry, at, end int) []*entry {
	n := len(ups)
	if n == 0 {
		return entries[at:end:end]
	}
	if cap(ups) == n && at >= n && &entries[at-n] == &ups[0] {
		return entries[at-n : end : end] // it continues the frame's list
	}
	return append(ups, entries[at:end]...)
}

// extendRun records that the response's entries from at on are the frame's
// records from to to, extending the last run when they continue it.
func extendRun(runs []wire.Run, at, from, to int) []wire.Run {
	if k := len(runs) - 1; k >= 0 && runs[k].To == from && runs[k].At+runs[k].To-runs[k].From == at {
		runs[k].To = to
		return runs
	}
	return append(runs, wire.Run{At: at, From: from, To: to})
}

// owes returns what the scan is to send for position i of frame f: the
// client's shape of the frame's entry, or nil. client.mu held.
func (w *watch) owes(f *frame, i int) *entry {
	sl := f.slots[i]
	h, ok := w.sent.get(sl)
	if !ok {
		return nil // not subscribed
	}
	e := w.visible(sl, f.entries[i])
	if e == nil || same(h, e) {
		return nil
	}
	if w.t.chunkIn(w.c.scope, sl.idx>>chunkBits).at(sl.idx&(chunkLen-1)) != f.entries[i] {
		return nil // changed since the frame: not the scan's to send (the third rule above)
	}
	if len(w.dirty) > 0 {
		if _, ok := w.dirty[sl]; ok {
			return nil // a newer state: the dirty map sends it
		}
	}
	return e
}

// pendingScan counts the names the pending scan will send, for the admin
// API. client.mu held.
func (w *watch) pendingScan() int {
	f, n := w.scan, 0
	if f == nil {
		return 0
	}
	for i := w.scanAt; i < len(f.slots); i++ {
		if w.owes(f, i) != nil {
			n++
		}
	}
	return n
}

// claimChunks subscribes the watch to the slots of a bulk request (in the
// request's order) a chunk at a time where it can: wherever the slots of
// one chunk of the type, consecutive in slots, are exactly the chunk's
// slots with an entry, the chunk's entries are sent as they are (plain,
// no Rewrite: nothing for settle to do), and the watch holds nothing of
// the chunk, the watch takes the chunk's shared twin and each slot gets
// the watch as a subscriber: what subscribe would have done name by name,
// without a sent-set write, pin or settle per name. It returns the ranges
// of slots it subscribed, in order; the caller subscribes the rest. It
// counts nothing against a limit: the caller must know that none can be
// breached. Both locks held.
func (w *watch) claimChunks(slots []*slot) (done [][2]int) {
	h := &w.sent
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
