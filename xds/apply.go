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
		b.refuse(e, err)
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
	s.orphans.release()
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
	first := !s.Ready()
	if len(changes) == 0 && !first {
		return
	}
	// Upserts before removals, upserts in rank order and removals in break
	// order: the order in which a writer that looks mid-Apply finds them is
	// make-before-break too.
	slices.SortStableFunc(changes[:nup], func(a, b change) int { return a.t.rank - b.t.rank })
	slices.SortStableFunc(changes[nup:], func(a, b change) int { return a.t.brk - b.t.brk })

	s.gen++
	f := fanout{gen: s.gen, eds: s.gate.eds}
	for _, ch := range changes {
		ch.sl.cur = ch.e
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
	for _, ch := range changes {
		f.change(ch)
	}
	// A removed name that no client holds, subscribes to or is owed is
	// forgotten at once; the others once the last removal is sent.
	for _, ch := range changes[nup:] {
		ch.t.release(ch.sl)
	}
	if first {
		s.readiness.markReady(time.Now())
		for c := range s.clients {
			f.touched = append(f.touched, c) // duplicates only cost a no-op poke
		}
		s.log.Info("xds ready", "resources", len(entries))
	}
	s.views.changed(changes) // after readiness, so a woken view can read
	for _, c := range f.touched {
		c.poke()
	}
	s.m.apply.Observe(time.Since(start).Seconds())
}

// refuse reports a refused entry: counted, logged, and passed to
// Options.OnRefused.
func (b *Batch) refuse(e *entry, err error) {
	s := b.s
	s.size.refusedResources.WithLabelValues(shortType(e.typ)).Inc()
	s.log.Error("refusing a resource version; keeping the last good one", "type", e.typ, "name", e.name, "err", err)
	if s.opts.OnRefused != nil {
		s.opts.OnRefused(Key{Type: e.typ, Name: e.name}, err)
	}
}
