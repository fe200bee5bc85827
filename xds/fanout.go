package xds

// fanout marks one Apply's changes on the watches subscribed to them and
// collects the clients it touched, each once: a client's
// registration.gen is the generation of the last Apply that collected it.
// eds is the store of assignments, whose entries a changed cluster
// re-marks. A fanout lives for one Apply, under Server.mu.
type fanout struct {
	gen     uint64
	eds     *typeState
	touched []*client
}

// change marks an installed change pending on the watches subscribed to
// it. A changed cluster also re-marks its assignment (forced), because
// Envoy re-warms the cluster and waits for it; a cluster whose scopes
// alone changed is not re-warmed by a client that keeps it.
func (f *fanout) change(ch change) {
	f.subscribers(ch.t, ch.sl, ch.e, ch.was, false)
	if ch.e != nil && ch.e.edsName != "" && !sameContent(ch.was, ch.e) {
		if esl := f.eds.slots[ch.e.edsName]; esl != nil && esl.cur != nil {
			f.subscribers(f.eds, esl, esl.cur, esl.cur, true)
		}
	}
}

// subscribers marks e (nil: removed) as sl's pending change on every watch
// of t subscribed to sl, by name or by wildcard. Of the scoped wildcards,
// only those of the scopes that e or was (the entry e replaces) is in are
// marked: a client of another scope neither had nor gets it.
func (f *fanout) subscribers(t *typeState, sl *slot, e, was *entry, force bool) {
	mark := func(w *watch) {
		c := w.c
		c.mu.Lock()
		w.mark(sl, e, force)
		c.mu.Unlock()
		if c.registration.collect(f.gen) {
			f.touched = append(f.touched, c)
		}
	}
	sl.subs.each(func(i int) { mark(t.watches[i]) })
	for id, ws := range t.wild {
		if id != 0 && !e.reaches(id) && !was.reaches(id) {
			continue
		}
		for w := range ws {
			if !sl.subs.has(w.idx) {
				mark(w)
			}
		}
	}
}
