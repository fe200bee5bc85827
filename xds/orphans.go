package xds

// orphan queues sl of t for release. It takes only Server.orphanMu.
func (s *Server) orphan(t *typeState, sl *slot) {
	s.orphanMu.Lock()
	s.orphans = append(s.orphans, orphan{t, sl})
	s.orphaned.Store(true)
	s.orphanMu.Unlock()
}

// releaseOrphans releases the queued slots that nothing references any
// more (a slot may have been given an entry, or been claimed, since it was
// queued). Server.mu held.
func (s *Server) releaseOrphans() {
	if !s.orphaned.Load() {
		return
	}
	s.orphanMu.Lock()
	q := s.orphans
	s.orphans = nil
	s.orphaned.Store(false)
	s.orphanMu.Unlock()
	for _, o := range q {
		o.t.release(o.sl)
	}
}

// reapOrphans takes Server.mu to release the queued orphans, if there are
// any: every writer looks when it runs out of work, so the look is one
// atomic load. No lock held.
func (s *Server) reapOrphans() {
	if s.orphaned.Load() {
		s.mu.Lock()
		s.releaseOrphans()
		s.mu.Unlock()
	}
}
