package xds

import (
	"sync"
	"time"

	"google.golang.org/grpc/mem"
)

// A subscription that covers much of a type at once (a wildcard, an Envoy's
// first EDS request naming every cluster) used to queue one pending entry
// per name in the watch's dirty map: at 10,000 names that map's inserts,
// growth and deletes were most of the server's CPU for a client's initial
// state. Instead such a request queues a scan: the watch keeps a frame of
// the type (its entries at the moment of the request, immutable and shared
// by every watch that scans the same moment), and its writer walks the
// frame comparing each entry with what the client holds, a few loads per
// name and no allocation.
//
// Correctness rests on two rules. A change after the frame was taken is
// marked in the dirty map as always, so the dirty map is never older than
// the frame; hence the scan skips a name the dirty map has, and the scan
// runs to its end before the dirty map is drained, so an older frame entry
// is never sent after a newer one. And every request that queues a scan
// restarts it from the type's current frame, so names subscribed after an
// earlier frame are compared with their current entries.

// frame is a type's resources with an entry at one moment: slots[i] had
// entries[i]. Built under Server.mu, then read-only, so writers read it
// holding only client.mu.
type frame struct {
	slots   []*slot
	entries []*entry
	recs    [2]records // SotW, delta; built on first use
}

// Written as one buffer per record, an initial state of 10,000 resources
// is 10,000 buffers for gRPC, whose writer walks them for each 16 KB
// frame, allocating a slice of them each time: a quarter of the server's
// CPU in a cold start. So a frame also holds its records concatenated,
// built once and shared by every client, and a response remembers which of
// its entries are consecutive records of its frame (runs), to send each
// run as one buffer.

// records are the frame's SotW or delta records back to back: record i is
// b[off[i]:off[i+1]].
type records struct {
	once sync.Once
	b    []byte
	off  []int
}

// run is list[at:at+to-from] of a response: the records from to to of its
// frame.
type run struct{ at, from, to int }

// records returns the frame's records of one form, concatenating them on
// first use (safe from any writer).
func (f *frame) records(delta bool) *records {
	r := &f.recs[0]
	if delta {
		r = &f.recs[1]
	}
	r.once.Do(func() {
		n := 0
		for _, e := range f.entries {
			n += e.recLen(delta)
		}
		r.b, r.off = make([]byte, 0, n), make([]int, 0, len(f.entries)+1)
		for _, e := range f.entries {
			r.off = append(r.off, len(r.b))
			r.b = append(r.b, e.record(delta).ReadOnlyData()...)
		}
		r.off = append(r.off, len(r.b))
	})
	return r
}

// appendRecords appends the records of list to bs, each run of fr as one
// buffer.
func appendRecords(bs mem.BufferSlice, list []*entry, fr *frame, runs []run, delta bool) mem.BufferSlice {
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].at == i {
			r, recs := runs[0], fr.records(delta)
			bs = append(bs, mem.SliceBuffer(recs.b[recs.off[r.from]:recs.off[r.to]]))
			runs, i = runs[1:], i+r.to-r.from
			continue
		}
		bs = append(bs, list[i].record(delta))
		i++
	}
	return bs
}

// charge is what a response of list keeps alive (see budget): the bytes
// of its records outside runs, and the records of fr the runs slice.
func charge(list []*entry, fr *frame, runs []run, delta bool) (own int, shared *records) {
	if len(runs) > 0 {
		shared = fr.records(delta)
	}
	for i := 0; i < len(list); {
		if len(runs) > 0 && runs[0].at == i {
			i += runs[0].to - runs[0].from
			runs = runs[1:]
			continue
		}
		own += list[i].recLen(delta)
		i++
	}
	return own, shared
}

// buffersFor is the capacity of a response's buffer list: the envelope's
// two, one per run and one per entry outside the runs.
func buffersFor(list []*entry, runs []run) int {
	n := len(list) + 2
	for _, r := range runs {
		n -= r.to - r.from - 1
	}
	return n
}

// frame returns the type's current frame, building it when the type
// changed since the last one. Server.mu held.
func (t *typeState) frame() *frame {
	if t.cur != nil {
		return t.cur
	}
	f := &frame{}
	for _, sl := range t.byIdx {
		if sl != nil && sl.cur != nil {
			f.slots = append(f.slots, sl)
			f.entries = append(f.entries, sl.cur)
		}
	}
	t.cur = f
	return f
}

// bulk reports whether a request subscribing n names should queue a scan
// rather than compare name by name: a scan costs a few loads per resource
// of the type, a dirty entry some twenty times that.
// A bulk request also gives the held set its dense form up front.
func (w *watch) bulk(n int) bool {
	if n < 64 || 4*n < w.t.total() {
		return false
	}
	w.held.reserve(n)
	return true
}

// rescan queues a comparison of the whole subscription with the type's
// current state (see above). Both locks held.
func (w *watch) rescan() { w.scan, w.scanAt = w.t.frame(), 0 }

// settle is reconcile for a name of a bulk subscription: a visible entry is
// left to the scan that the caller queues; the rest (waits for unknown
// names, removals) is done at once. Both locks held.
func (w *watch) settle(sl *slot, now time.Time) {
	if w.c.visible(sl.cur) == nil {
		w.reconcile(sl, now)
	}
}

// scanned takes into ups (empty) the entries of the pending scan that the
// client lacks, while they fit (when split) in room, with the runs of the
// scan's frame among them. done is false when the scan stopped for room.
// client.mu held.
func (w *watch) scanned(ups []*entry, used, room int, split bool) (_ []*entry, _ int, _ *frame, runs []run, done bool) {
	f := w.scan
	for ; w.scanAt < len(f.slots); w.scanAt++ {
		sl := f.slots[w.scanAt]
		h, ok := w.held.get(sl)
		if !ok {
			continue // not subscribed
		}
		e := w.c.visible(f.entries[w.scanAt])
		if e == nil || same(h, e) {
			continue
		}
		if len(w.dirty) > 0 {
			if _, ok := w.dirty[sl]; ok {
				continue // a newer state: the dirty map sends it
			}
		}
		n := e.recLen(w.c.delta)
		if split && len(ups) > 0 && used+n > room {
			return ups, used, f, runs, false
		}
		used += n
		if ups == nil {
			ups = make([]*entry, 0, len(f.slots)-w.scanAt)
		}
		w.held.put(sl, e)
		if len(w.waiting) > 0 {
			delete(w.waiting, sl)
		}
		if e == f.entries[w.scanAt] { // the client's shape is the entry itself
			if k := len(runs) - 1; k >= 0 && runs[k].to == w.scanAt && runs[k].at+runs[k].to-runs[k].from == len(ups) {
				runs[k].to++
			} else {
				runs = append(runs, run{at: len(ups), from: w.scanAt, to: w.scanAt + 1})
			}
		}
		ups = append(ups, e)
	}
	w.scan = nil
	return ups, used, f, runs, true
}

// pendingScan counts the names the pending scan will send, for the admin
// API. client.mu held.
func (w *watch) pendingScan() int {
	f, n := w.scan, 0
	if f == nil {
		return 0
	}
	for i := w.scanAt; i < len(f.slots); i++ {
		h, ok := w.held.get(f.slots[i])
		if e := w.c.visible(f.entries[i]); ok && e != nil && !same(h, e) {
			if _, ok := w.dirty[f.slots[i]]; !ok {
				n++
			}
		}
	}
	return n
}
