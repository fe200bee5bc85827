package xds

import (
	"sync"
)

type change struct {
	t   *typeState
	sl  *slot
	e   *entry // nil: removal
	was *entry // the entry it replaces (nil: none)
}

// viewSet is the views' side of the server: the change subscribers and the
// per-type generations. Its own lock, so that views never take Server.mu
// to learn that nothing changed.
type viewSet struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	gen  map[string]uint64
}

// changed records an Apply's changes and signals every view. Server.mu
// held (so generations move in Apply order).
func (vs *viewSet) changed(changes []change) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.gen == nil {
		vs.gen = make(map[string]uint64)
	}
	for _, ch := range changes {
		vs.gen[ch.t.url]++
	}
	for c := range vs.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
