package xds

import (
	"slices"
	"time"
)

// Apply upserts and removes resources as one change. Versions are content
// hashes; an upsert identical to what is served is a no-op, and so is a
// removal of an unknown name. Changes are pushed to subscribed clients in
// make-before-break order. The first Apply marks the server ready. A
// resource that cannot be marshalled, or whose Type does not match its
// message, is logged and skipped. If a name is both upserted and removed,
// the removal wins.
func (s *Server) Apply(upserts []Resource, removals []Key) {
	b := s.Batch()
	for _, r := range upserts {
		b.Upsert(r)
	}
	b.removals = removals
	b.Apply()
}

// A Batch is one Apply built a resource at a time, for a caller that makes
// its resources as it goes (a publisher translating services): Upsert
// marshals a resource's messages at once and keeps only their encoding,
// so the caller can let the messages go. A large change then never holds
// every message at once: those of a first state of 100,000 services are
// several times the size of their encodings, and were most of the
// process's peak heap. Not safe for concurrent use.
type Batch struct {
	s        *Server
	entries  []*entry
	removals []Key
}

// Batch starts a change; nothing of it is applied before Batch.Apply.
func (s *Server) Batch() *Batch { return &Batch{s: s} }

// Upsert adds r to the change, as Apply's upserts: r is marshalled now
// (and skipped, or refused through Options.OnRefused, as Apply would) and
// its messages are not kept.
func (b *Batch) Upsert(r Resource) {
	e, err := newEntry(r)
	if err != nil {
		b.s.log.Error("skipping resource", "err", err)
		return
	}
	if err := b.s.size.check(e); err != nil {
		b.s.refuseResource(e, err)
		return
	}
	b.entries = append(b.entries, e)
}

// Remove adds the removal of k to the change, as Apply's removals.
func (b *Batch) Remove(k Key) { b.removals = append(b.removals, k) }

// Apply applies the change as Server.Apply does. A Batch is applied once.
// The apply duration metric starts here: marshalling is the caller's.
func (b *Batch) Apply() {
	start := time.Now()
	s, entries, removals := b.s, b.entries, b.removals
	b.entries, b.removals = nil, nil
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseOrphans()
	var changes []change
	for _, e := range entries {
		t := s.typeFor(e.typ)
		sl := t.get(e.name)
		if c := sl.cur; sameContent(c, e) && c.scopes == e.scopes && c.denied == e.denied && c.private == e.private {
			continue
		}
		t.seen |= e.scopes | e.denied
		changes = append(changes, change{t, sl, e, sl.cur})
	}
	nup := len(changes)
	for _, k := range removals {
		if t := s.types[k.Type]; t != nil {
			if sl := t.slots[k.Name]; sl != nil && sl.cur != nil {
				changes = append(changes, change{t, sl, nil, sl.cur})
			}
		}
	}
	first := s.readyNs.Load() == 0
	if len(changes) == 0 && !first {
		return
	}
	// Upserts before removals, upserts in rank order and removals in break
	// order: the order in which a writer that looks mid-Apply finds them is
	// make-before-break too.
	slices.SortStableFunc(changes[:nup], func(a, b change) int { return a.t.rank - b.t.rank })
	slices.SortStableFunc(changes[nup:], func(a, b change) int { return a.t.brk - b.t.brk })

	s.gen++
	for _, ch := range changes {
		ch.sl.cur = ch.e
		clear(ch.t.cachedFrames)
		ch.t.touchChunk(ch.sl.idx)
		switch {
		case ch.was == nil && ch.e != nil:
			s.resources.Add(1)
		case ch.was != nil && ch.e == nil:
			s.resources.Add(-1)
		}
	}
	// Published before the first mark: a writer already running may send
	// a change as soon as it is marked, and finds the chunk it converges
	// to (tables.go).
	for _, ch := range changes {
		ch.t.publishChunks() // a no-op after the type's first
	}
	var touched []*client
	for _, ch := range changes {
		touched = s.markChange(ch, touched)
	}
	// A removed name that no client holds, subscribes to or is owed is
	// forgotten at once; the others once the last removal is sent.
	for _, ch := range changes[nup:] {
		ch.t.release(ch.sl)
	}
	if first {
		s.readyNs.Store(time.Now().UnixNano())
		close(s.ready)
		for c := range s.clients {
			touched = append(touched, c) // duplicates only cost a no-op poke
		}
		s.log.Info("xds ready", "resources", len(entries))
	}
	s.views.changed(changes) // after readiness, so a woken view can read
	for _, c := range touched {
		c.poke()
	}
	s.m.apply.Observe(time.Since(start).Seconds())
}

// sameContent reports whether entries a and b (either nil: none) serve the
// same resource to every client that gets both, whatever their scopes.
func sameContent(a, b *entry) bool {
	return a != nil && b != nil && a.version == b.version && a.grpcOnly == b.grpcOnly && same(a.grpc, b.grpc)
}

// markChange marks an installed change pending on the watches subscribed
// to it. A changed cluster also re-marks its assignment (forced), because
// Envoy re-warms the cluster and waits for it; a cluster whose scopes
// alone changed is not re-warmed by a client that keeps it. Server.mu
// held.
func (s *Server) markChange(ch change, touched []*client) []*client {
	touched = s.markSubscribers(ch.t, ch.sl, ch.e, ch.was, false, touched)
	if ch.e != nil && ch.e.edsName != "" && !sameContent(ch.was, ch.e) {
		if et := s.types[EndpointType]; et != nil {
			if esl := et.slots[ch.e.edsName]; esl != nil && esl.cur != nil {
				touched = s.markSubscribers(et, esl, esl.cur, esl.cur, true, touched)
			}
		}
	}
	return touched
}

// markSubscribers marks e (nil: removed) as sl's pending change on every
// watch of t subscribed to sl, by name or by wildcard, and collects each
// client touched once per Apply. Of the scoped wildcards, only those of
// the scopes that e or was (the entry e replaces) is in are marked: a
// client of another scope neither had nor gets it. Server.mu held.
func (s *Server) markSubscribers(t *typeState, sl *slot, e, was *entry, force bool, touched []*client) []*client {
	mark := func(w *watch) {
		c := w.c
		c.mu.Lock()
		w.mark(sl, e, force)
		c.mu.Unlock()
		if c.gen != s.gen {
			c.gen = s.gen
			touched = append(touched, c)
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
	return touched
}

// refuseResource reports a refused entry: counted, logged, and passed to
// Options.OnRefused.
func (s *Server) refuseResource(e *entry, err error) {
	s.size.refusedResources.WithLabelValues(shortType(e.typ)).Inc()
	s.log.Error("refusing a resource version; keeping the last good one", "type", e.typ, "name", e.name, "err", err)
	if s.opts.OnRefused != nil {
		s.opts.OnRefused(Key{Type: e.typ, Name: e.name}, err)
	}
}
