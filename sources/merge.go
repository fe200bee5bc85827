package sources

import (
	"cmp"
	"slices"
)

// merger holds what every source reported, what was last published, and
// the names that may differ between the two. It is not safe for concurrent
// use: the manager's loop owns it.
//
// Its costs follow the size of an update, never the number of services: an
// update marks the names it touched as dirty, and a flush looks only at the
// dirty names, resolving each by precedence over the (few) sources.
type merger struct {
	bySource  []map[string]Service // index = precedence, 0 wins
	synced    []bool
	nsynced   int
	published map[string]Service
	dirty     map[string]struct{}
}

func newMerger(n int) *merger {
	m := &merger{
		bySource:  make([]map[string]Service, n),
		synced:    make([]bool, n),
		published: map[string]Service{},
		dirty:     map[string]struct{}{},
	}
	for i := range m.bySource {
		m.bySource[i] = map[string]Service{}
	}
	return m
}

func (m *merger) allSynced() bool { return m.nsynced == len(m.synced) }

// apply records update u of source src and reports whether it may change
// the merged state. The update's services are kept as they are (the Update
// contract hands them over), sorted in place.
func (m *merger) apply(src int, u Update) (changed bool) {
	if !m.synced[src] {
		m.synced[src] = true
		m.nsynced++
	}
	state := m.bySource[src]
	if u.Full {
		// Services absent from a full update are gone. A set of the new
		// names is the price of a full update, which carries them all anyway.
		keep := make(map[string]struct{}, len(u.Services))
		for _, s := range u.Services {
			keep[s.Name] = struct{}{}
		}
		for name := range state {
			if _, ok := keep[name]; !ok {
				delete(state, name)
				changed = m.touch(src, name) || changed
			}
		}
	} else {
		for _, name := range u.Removed {
			if _, ok := state[name]; ok {
				delete(state, name)
				changed = m.touch(src, name) || changed
			}
		}
	}
	for _, s := range u.Services {
		s.Sort()
		if old, ok := state[s.Name]; ok && old.Equal(s) {
			continue
		}
		state[s.Name] = s
		changed = m.touch(src, s.Name) || changed
	}
	return changed
}

// touch marks name dirty unless a source of higher precedence than src
// owns it, in which case src's change is invisible.
func (m *merger) touch(src int, name string) bool {
	for _, higher := range m.bySource[:src] {
		if _, ok := higher[name]; ok {
			return false
		}
	}
	m.dirty[name] = struct{}{}
	return true
}

// winner returns the version of name served by precedence.
func (m *merger) winner(name string) (Service, bool) {
	for _, state := range m.bySource {
		if s, ok := state[name]; ok {
			return s, true
		}
	}
	return Service{}, false
}

// flush returns the difference between the merged state and what was last
// published, by content, and records it as published.
func (m *merger) flush() Changes {
	var c Changes
	for n := range m.dirty {
		win, ok := m.winner(n)
		old, had := m.published[n]
		switch {
		case ok && had && old.Equal(win):
		case ok:
			c.Upserted = append(c.Upserted, win)
			m.published[n] = win
		case had:
			c.Removed = append(c.Removed, n)
			delete(m.published, n)
		}
	}
	// A fresh map rather than clear(): iterating a map costs its capacity,
	// and the first sync leaves it as large as the whole state.
	m.dirty = map[string]struct{}{}
	slices.SortFunc(c.Upserted, func(a, b Service) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(c.Removed)
	return c
}
