package xds

import (
	"time"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// next builds the next response the client is owed and records it as sent.
// Order is make-before-break (see doc.go): first every type's upserts in rank
// order (CDS, EDS, SDS, LDS, RDS, others: rank), then every type's removals. Because it
// re-reads the pending state on each call, a change arriving between two
// sends still lands in that order. It returns nil when nothing is owed, with
// the earliest pending unknown-name deadline (zero if none). client.mu held.
func (c *client) next(now time.Time) (*outbound, time.Time) {
	readyAt := c.s.readiness.readyAt()
	if readyAt.IsZero() {
		return nil, time.Time{} // readiness gate: nothing before the first Apply
	}
	wait := c.s.opts.UnknownNameWait
	for _, w := range c.order {
		if o := w.upserts(now, readyAt, wait); o != nil {
			return o, time.Time{}
		}
	}
	for _, w := range c.brk {
		if o := w.removals(); o != nil {
			return o, time.Time{}
		}
	}
	var first time.Time
	for _, w := range c.order {
		first = w.earliest(first, readyAt, wait)
	}
	return nil, first
}

// upserts takes the pending new/changed entries and the expired unknown
// names of the watch into one response. Where the protocol allows a subset
// (delta; SotW types other than CDS/LDS), it takes no more than fits in one
// response and leaves the rest pending for the next (see responseSize).
func (w *watch) upserts(now, readyAt time.Time, wait time.Duration) *outbound {
	var ups []*entry
	w.dirtyPeak = max(w.dirtyPeak, len(w.dirty))
	split := w.c.delta || !w.t.full
	room, used := w.c.s.size.room, 0
	var fr *frame
	var runs []wire.Run
	if w.scan != nil {
		// The scan first: it must not send a frame's entry after the dirty
		// map sent a newer one (scan.go).
		var done bool
		if ups, used, fr, runs, done = w.scanned(ups, used, room, split); !done {
			return w.respond(ups, nil, fr, runs)
		}
	}
	if ups == nil && len(w.dirty) > 0 {
		// Sized for a push of a few changes; a burst grows it as usual.
		ups = make([]*entry, 0, min(len(w.dirty), 256))
	}
	for sl, p := range w.dirty {
		if p.e == nil {
			continue // a removal: second phase
		}
		h, ok := w.sent.get(sl)
		if !ok && !w.wildcard {
			delete(w.dirty, sl)
			continue // unsubscribed meanwhile
		}
		if same(h, p.e) && !p.force {
			delete(w.dirty, sl)
			continue // coalesced back to what the client has (or NACKed)
		}
		if len(p.e.refs) > 0 && !w.c.ready(p.e) {
			continue // its clusters are not ready at the client yet (gate.go)
		}
		n := p.e.recLen(w.c.delta)
		if split && len(ups) > 0 && used+n > room {
			break // the rest goes in the next response
		}
		used += n
		delete(w.dirty, sl)
		w.noteSent(w.c.member, w.t.url, sl, h, p.e)
		w.sent.put(sl, p.e)
		delete(w.waiting, sl)
		ups = append(ups, p.e)
	}
	w.settleDirty()
	var gone []*slot
	for sl, ws := range w.waiting {
		if now.Before(deadline(ws, readyAt, wait)) {
			continue
		}
		delete(w.waiting, sl)
		if h, ok := w.sent.get(sl); ok && h == nil {
			if w.t.full && !w.c.delta && w.pushes > ws.pushes {
				continue // a full-state response sent since told the client
			}
			gone = append(gone, sl)
		}
	}
	if len(ups) == 0 && len(gone) == 0 && !w.firstOwed {
		return nil
	}
	return w.respond(ups, gone, fr, runs)
}

// removals takes the pending removals of resources the client holds, as
// many as fit in one response, and of names a delta client subscribed to
// by name (or is owed an answer for: a forced mark) whose resource went
// before it was sent: the removal is the answer. A removal is only marked
// for a name that had a resource, so this never cuts an unknown name's
// wait short. SotW EDS/RDS send nothing: Envoy drops an assignment with
// its cluster.
func (w *watch) removals() *outbound {
	var rem []*slot
	room, used := w.c.s.size.room, 0
	for sl, p := range w.dirty {
		if p.e != nil {
			continue
		}
		n := wire.FieldLen(len(sl.name))
		if len(rem) > 0 && used+n > room {
			break
		}
		used += n
		h, ok := w.sent.get(sl)
		if ok && h != nil && h != stale && w.c.needed(w, sl) {
			continue // a route the client holds still names it (gate.go)
		}
		explicit := w.explicit(sl)
		if ok && !explicit {
			// Out of the wildcard: the sent set lets go of the slot,
			// which may then be released (see slot.owed).
			w.sent.del(sl)
			delete(w.waiting, sl)
		}
		if w.undirty(sl, p) {
			w.c.s.orphans.add(w.t, sl)
		}
		if !ok || h == nil && !(w.c.delta && (p.force || explicit)) {
			continue
		}
		if explicit {
			w.sent.put(sl, nil)
		}
		w.noteSent(w.c.member, w.t.url, sl, h, nil)
		rem = append(rem, sl)
	}
	w.settleDirty()
	if len(rem) == 0 || (!w.c.delta && !w.t.full) {
		return nil
	}
	return w.respond(nil, rem, nil, nil)
}

// respond makes the response: delta carries ups and names gone as removed;
// SotW CDS/LDS carry everything held (so a pending removal is still in the
// upsert-phase response), SotW EDS carries ups plus an empty assignment per
// unknown name, other SotW types carry ups. runs are those of fr among
// ups (scan.go).
func (w *watch) respond(ups []*entry, gone []*slot, fr *frame, runs []wire.Run) *outbound {
	c := w.c
	c.nonce++
	w.firstOwed = false
	w.record(c.nonce)
	o := &outbound{t: w.t}
	env := wire.Envelope{Version: w.lastVersion, TypeURL: w.t.url, Nonce: w.lastNonce}
	if c.delta {
		m := &deltaMsg{env: env, list: ups, fr: fr, runs: runs}
		own, inRuns := listBytes(ups, fr, runs, true)
		o.bytes = own + inRuns // the Resource records
		for _, sl := range gone {
			m.removed = append(m.removed, sl.name)
			o.bytes += len(sl.name)
		}
		o.msg, o.resources = m, len(ups)
		return o
	}
	if w.t.full {
		// Everything held, the changes just put included (sentSet.pieces, response.go).
		pieces, n, size := w.sent.pieces()
		c.s.size.noteFull(c.s.log, w.t, n, size)
		o.msg, o.resources, o.bytes = &sotwMsg{env: env, pieces: pieces}, n, size
		return o
	}
	list := ups
	if w.t.url == EndpointType {
		for _, sl := range gone {
			e := emptyAssignment(sl.name)
			w.noteSent(w.c.member, w.t.url, sl, nil, e)
			w.sent.put(sl, e)
			list = append(list, e)
		}
	}
	for _, e := range list {
		o.bytes += e.size
	}
	o.msg, o.resources = &sotwMsg{env: env, list: list, fr: fr, runs: runs}, len(list)
	return o
}

func (m *typeMetrics) sent(o *outbound) {
	m.pushes.Inc()
	m.resources.Add(float64(o.resources))
	m.bytes.Add(float64(o.bytes))
}
