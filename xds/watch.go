package xds

import (
	"time"

	"google.golang.org/grpc/codes"
)

// pin keeps sl, a name without an entry, from being released while the
// watch references it, counting it against Limits.UnknownNames. Both locks
// held.
func (w *watch) pin(sl *slot) *refusal {
	if sl.cur != nil {
		return nil // not released while it has one
	}
	if _, ok := w.pins[sl]; ok {
		return nil
	}
	c := w.c
	if limit := c.s.opts.Limits.UnknownNames; c.unknown >= limit {
		w.t.release(sl) // if the request created it
		return newRefusal(reasonUnknownNames, codes.ResourceExhausted,
			"more than %d names the server does not have", limit)
	}
	if w.pins == nil {
		w.pins = make(map[*slot]struct{})
	}
	w.pins[sl] = struct{}{}
	sl.pins++
	c.unknown++
	return nil
}

// sweep unpins, and releases if nobody else needs them, the slots the watch
// no longer references: not subscribed, held, pending or waiting, or which
// got an entry meanwhile. Both locks held.
func (w *watch) sweep() {
	for sl := range w.pins {
		if sl.cur == nil && (sl.subs.has(w.idx) || w.sent.has(sl)) {
			continue
		}
		if _, ok := w.dirty[sl]; ok {
			continue
		}
		if _, ok := w.waiting[sl]; ok {
			continue
		}
		w.unpin(sl)
	}
}

func (w *watch) unpin(sl *slot) {
	delete(w.pins, sl)
	sl.pins--
	w.c.unknown--
	w.t.release(sl)
}

// explicit reports whether sl is subscribed by name. client.mu held.
func (w *watch) explicit(sl *slot) bool {
	if w.wildcard {
		return w.isNamed(sl)
	}
	return w.sent.has(sl)
}

// mark records that sl now has entry e (nil = removed), the store's entry
// (the client's shape of it is what is kept). Coalesces: only the newest
// entry per name is kept. A removal of what the client does not hold
// (a wildcard's name it was never sent) is nothing to send, and is not
// kept: a client that stops reading then holds one pending change per name
// it holds or the store has, not one per name that came and went. A
// removal kept counts in slot.owed. Server.mu and client.mu held.
func (w *watch) mark(sl *slot, e *entry, force bool) {
	e = w.visible(sl, e)
	old, ok := w.dirty[sl]
	if e == nil {
		if !w.sent.has(sl) {
			if ok && w.undirty(sl, old) {
				w.t.release(sl)
			}
			return
		}
		if !ok || old.e != nil {
			sl.owed.Add(1)
		}
	} else if ok && old.e == nil {
		sl.owed.Add(-1) // it has an entry again: nothing to release
	}
	w.dirty[sl] = pend{e: e, force: force || (ok && old.force)}
}

// reconcile compares what the client holds of sl with its current entry and
// queues the difference; a subscribed name without a visible entry starts
// its bounded wait. Server.mu and client.mu held.
func (w *watch) reconcile(sl *slot, now time.Time) {
	h, ok := w.sent.get(sl)
	if !ok {
		return
	}
	want := w.visible(sl, sl.cur)
	if !same(h, want) {
		w.mark(sl, sl.cur, false)
	}
	if want == nil && h == nil {
		w.waiting[sl] = waitSince{at: now, immediate: sl.cur != nil, pushes: w.pushes}
	}
}

// subscribe adds sl to the explicit subscription; with bulk, a visible
// entry is left to a scan the caller queues (see settle). Both locks held.
func (w *watch) subscribe(sl *slot, now time.Time, bulk bool) {
	if e := sl.cur; e != nil && e.private && w.c.s.opts.OnDenied != nil && w.visible(sl, e) == nil {
		w.c.s.opts.OnDenied(w.c.node, Key{Type: w.t.url, Name: sl.name})
	}
	sl.subs.add(w.idx)
	if w.wildcard {
		w.named[sl] = struct{}{}
	}
	if !w.sent.has(sl) {
		w.sent.put(sl, nil)
	}
	if bulk {
		w.settle(sl, now)
	} else {
		w.reconcile(sl, now)
	}
}

// subscribeChecked subscribes to sl within Limits.NamesPerSubscription.
// Both locks held.
func (w *watch) subscribeChecked(sl *slot, now time.Time, bulk bool) *refusal {
	if limit := w.c.s.opts.Limits.NamesPerSubscription; !w.explicit(sl) && w.explicitCount() >= limit {
		return newRefusal(reasonNamesPerSub, codes.ResourceExhausted,
			"subscribing to more than the %d names allowed per type", limit)
	}
	w.subscribe(sl, now, bulk)
	return nil
}

// explicitCount is the number of names subscribed by name. client.mu held.
func (w *watch) explicitCount() int {
	if w.wildcard {
		return len(w.named)
	}
	return w.sent.len()
}

// unsubscribe drops sl from the explicit subscription. The client forgets
// the resource itself, so nothing is sent. Both locks held.
func (w *watch) unsubscribe(sl *slot) {
	sl.subs.remove(w.idx)
	if w.wildcard {
		delete(w.named, sl)
		if w.visible(sl, sl.cur) != nil {
			return // still delivered through the wildcard
		}
	}
	w.sent.del(sl)
	if p, ok := w.dirty[sl]; ok {
		w.undirty(sl, p)
	}
	delete(w.waiting, sl)
	w.t.release(sl)
}

// setWildcard turns the wildcard subscription on or off. Both locks held.
func (w *watch) setWildcard(on bool, now time.Time) {
	if on == w.wildcard {
		return
	}
	if on {
		w.named = make(map[*slot]struct{}, w.sent.len())
		for sl := range w.sent.all() {
			w.named[sl] = struct{}{}
		}
		w.wildcardOn(now)
		return
	}
	w.t.dropWild(w)
	w.wildcard = false
	w.wildcardChanged()
	var gone []*slot // without an entry, to release once out of every set
	for sl := range w.sent.all() {
		if _, ok := w.named[sl]; !ok {
			w.sent.del(sl)
			delete(w.waiting, sl)
			if sl.cur == nil {
				gone = append(gone, sl)
			}
		}
	}
	// Also the changes of names the watch never held: no longer
	// subscribed, it is not marked with their later changes, and a
	// change left here would be older than the frame of a later scan
	// (scan.go), which skips a name with a pending change.
	for sl, p := range w.dirty {
		if _, ok := w.named[sl]; !ok {
			if w.undirty(sl, p) {
				gone = append(gone, sl)
			}
		}
	}
	w.named = nil
	for _, sl := range gone {
		w.t.release(sl)
	}
}

// wildcardOn subscribes the watch to the whole type, w.named holding the
// names it subscribed to explicitly. Both locks held.
func (w *watch) wildcardOn(now time.Time) {
	w.wildcard = true
	w.wildcardChanged()
	w.t.addWild(w)
	w.sent.reserveDense(w.t.population(w.c.scope))
	for k := 0; k<<chunkBits < w.t.byIdx.span(); k++ {
		if w.sent.subscribeChunk(k, w.t.chunkIn(w.c.scope, k), w.c.rewrite != nil) {
			continue // the usual first request: whole chunks at once
		}
		page := w.t.byIdx.page(k)
		if page == nil {
			continue
		}
		for _, sl := range page {
			if sl == nil || sl.cur == nil || !sl.cur.inScope(w.c.scope) {
				continue
			}
			if !w.sent.has(sl) {
				if w.c.visible(sl.cur) == nil {
					// Hidden from this client (a proxyless gRPC
					// listener, to an Envoy): the wildcard does not
					// deliver it, so there is nothing to hold, wait
					// for or answer.
					continue
				}
				w.sent.put(sl, nil)
			}
			w.settle(sl, now)
		}
	}
	w.rescan()
	// Names the client claims (delta initial versions) that no longer
	// exist, or that its scope does not deliver, are removed.
	for sl, h := range w.sent.all() {
		if h != nil && w.visible(sl, sl.cur) == nil {
			w.mark(sl, nil, false)
		}
	}
}

// drop removes the watch from every index (stream end). Both locks held.
func (w *watch) drop() {
	w.t.dropWild(w)
	// First the removals it is owed, which keep slots its sent set reads.
	for sl, p := range w.dirty {
		if p.e == nil {
			sl.owed.Add(-1)
		}
	}
	clear(w.dirty)
	for sl := range w.sent.all() {
		sl.subs.remove(w.idx)
		w.t.release(sl)
	}
	for sl := range w.named {
		sl.subs.remove(w.idx)
		w.t.release(sl)
	}
	// Last: the sent set above still reads the slots pinned here.
	for sl := range w.pins {
		sl.pins--
		w.t.release(sl)
	}
	w.pins = nil
	w.t.removeWatch(w)
}

// private reports whether the watch is of a type the server does not serve:
// its first request is answered, empty, at once.
func (w *watch) private() bool { return w.c.private[w.t.url] == w.t }

// visible is e, sl's entry in the store, as the watch's client sees it,
// nil if hidden: an entry denied to the client's scope, or private and not
// granted to it, is hidden always, one outside its scope from a wildcard
// subscription only, so that a name the client asks for is served whatever
// its scope; then client.visible.
// Both locks, or client.mu, held.
func (w *watch) visible(sl *slot, e *entry) *entry {
	if id := w.c.scope; e != nil && !e.inScope(id) {
		if e.denied.Has(id) || e.private {
			return nil
		}
		if w.wildcard && !w.isNamed(sl) {
			return nil
		}
	}
	return w.c.visible(e)
}

// wildcardChanged tells the group whether a CDS member now subscribes to
// every cluster. Server.mu and client.mu held.
func (w *watch) wildcardChanged() {
	if m := w.c.member; m != nil && w.t.url == ClusterType {
		m.g.mu.Lock()
		m.wildcard = w.wildcard
		m.g.mu.Unlock()
		m.g.pokeBlocked()
	}
}

// watchFor returns the client's watch of t, creating it. Server.mu and
// client.mu held.
func (c *client) watchFor(t *typeState) *watch {
	if w := c.watches[t.url]; w != nil {
		return w
	}
	w := &watch{
		c:    c,
		t:    t,
		sent: sentSet{t: t, scope: c.scope},
		pending: pending{
			dirty:   make(map[*slot]pend),
			waiting: make(map[*slot]waitSince),
		},
	}
	t.addWatch(w)
	c.watchSet.add(w)
	return w
}

// rescan queues a comparison of the whole subscription with the type's
// current state (see above). Both locks held.
func (w *watch) rescan() { w.scan, w.scanAt = w.t.frame(w.c.scope), 0 }

// settle is reconcile for a name of a bulk subscription: a visible entry is
// left to the scan that the caller queues; the rest (waits for unknown
// names, removals, and names outside the client's scope, which its
// scope's frame does not hold) is done at once. Both locks held.
func (w *watch) settle(sl *slot, now time.Time) {
	if w.visible(sl, sl.cur) == nil || !sl.cur.inScope(w.c.scope) {
		w.reconcile(sl, now)
	}
}
