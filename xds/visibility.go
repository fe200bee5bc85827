package xds

import (
	"time"
)

// SetScopes sets how nodes map to scopes (nil: every node unscoped). Each
// connected stream whose scope changes is sent only the difference: the
// resources its new scope delivers by wildcard that it lacks, and the
// removal of those it holds that the scope no longer delivers. Resources'
// own scopes change with Apply (Resource.Scopes), which likewise sends
// each client the difference. A client whose scope changes costs a pass
// over the types it watches under the server's lock: a reload's cost, not
// a push's.
func (s *Server) SetScopes(f Scoper) {
	s.scoper.set(f)
	now := time.Now()
	s.mu.Lock()
	var touched []*client
	for c := range s.clients {
		if c.node == nil {
			continue // scoped with its first request
		}
		id, name := s.scoper.of(c.node)
		c.mu.Lock()
		c.scopeName = name
		if id != c.scope {
			c.rescope(id, now)
			touched = append(touched, c)
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	for _, c := range touched {
		c.poke()
	}
}

// rescope moves the client to scope id and queues the difference on each
// watch. Server.mu and client.mu held.
func (c *client) rescope(id int, now time.Time) {
	for _, w := range c.watches {
		if w.wildcard {
			w.t.dropWild(w)
		}
	}
	c.scope = id
	for _, w := range c.watches {
		w.sent.scope = id
		if w.wildcard {
			w.t.addWild(w)
		}
		w.rescope(now)
	}
}

// rescope compares the watch with its client's new scope: a wildcard
// gains the resources the scope delivers and loses those it no longer
// does; every watch loses the resources now denied to it. Both locks
// held.
func (w *watch) rescope(now time.Time) {
	if !w.wildcard {
		for sl := range w.sent.all() {
			w.reconcile(sl, now)
		}
	} else {
		for _, sl := range w.t.byIdx.all() {
			if sl.cur == nil {
				continue
			}
			h, sent := w.sent.get(sl)
			switch want := w.visible(sl, sl.cur); {
			case want != nil && !sent:
				w.sent.put(sl, nil)
				w.mark(sl, sl.cur, false)
			case want == nil && h != nil:
				w.mark(sl, nil, false)
			case want == nil && sent:
				w.sent.del(sl) // subscribed through the wildcard, never sent
				delete(w.waiting, sl)
			}
		}
	}
	if w.scan != nil {
		w.rescan()
	}
}
