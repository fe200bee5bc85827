package manager

import (
	"cmp"
	"log/slog"
	"slices"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
)

// merger holds what every source reported, what was last published, and
// the names that may differ between the two. It is not safe for concurrent
// use: the manager's loop owns it.
//
// Its costs follow the size of an update, never the number of services: an
// update marks the names it touched as dirty, and a flush looks only at the
// dirty names, resolving each over the (few) sources by the service's merge
// mode (see resolve.go).
//
// Its methods are here, but for resolve and the merge modes it applies
// (resolve.go).
type merger struct {
	bySource  []map[string]sources.Service // index = precedence, 0 wins
	synced    []bool
	published map[string]sources.Service
	dirty     map[string]struct{}
	// peaks are the most services bySource's maps held, and pubPeak
	// published's (reclaim.Map): a state that shrank gives its memory back.
	peaks   []int
	pubPeak int

	mergeCfg MergeConfig // what modes was compiled from, against names
	modes    mergeModes
	// names and views are the sources' names and status views (nil entries
	// allowed) by index; shadowed holds, by source, the services whose
	// endpoints that source reports but the merge does not serve.
	names    []string
	views    []*statusView
	shadowed []map[string]struct{}
	served   []bool // scratch of resolve: the sources whose version is served
	log      *slog.Logger
	// changes, when set, is told what each update after a source's first
	// changed in that source's state.
	changes *changeLog
}

// newMerger returns the merger of the sources named, in precedence order,
// under the merge configuration mc, with nothing reported yet.
func newMerger(named []Named, mc MergeConfig, log *slog.Logger) *merger {
	m := &merger{published: map[string]sources.Service{}, dirty: map[string]struct{}{}, mergeCfg: mc, log: log}
	from := make([]int, len(named))
	for j := range from {
		from[j] = -1 // every source is new
	}
	m.reorder(from)
	m.follow(named, from)
	return m
}

// apply records update u of source src and reports whether it may change
// the merged state. The update's services are kept as they are (the Update
// contract hands them over), sorted in place.
func (m *merger) apply(src int, u sources.Update) (changed bool) {
	note := m.note
	if !m.synced[src] {
		m.synced[src] = true
		note = func(int, byte, string) {} // the first sync is logged as such
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
				note(src, '-', name)
				changed = m.touch(src, name) || changed
			}
		}
	} else {
		for _, name := range u.Removed {
			if _, ok := state[name]; ok {
				delete(state, name)
				note(src, '-', name)
				changed = m.touch(src, name) || changed
			}
		}
	}
	for _, s := range u.Services {
		s.Sort()
		old, ok := state[s.Name]
		if ok && old.Equal(s) {
			continue
		}
		state[s.Name] = s
		mark := byte('+')
		if ok {
			mark = '~'
		}
		note(src, mark, s.Name)
		changed = m.touch(src, s.Name) || changed
	}
	m.bySource[src] = reclaim.Map(state, &m.peaks[src])
	return changed
}

// note tells changes, if set, that the update of source src added ('+'),
// changed ('~') or removed ('-') the service name.
func (m *merger) note(src int, mark byte, name string) {
	if m.changes != nil {
		m.changes.note(m.names[src], mark, name)
	}
}

// touch marks name dirty. Even a change that a source of higher
// precedence shadows is resolved at the next flush, because it changes
// what /sources reports as shadowed; the flush publishes nothing for it.
func (m *merger) touch(_ int, name string) bool {
	m.dirty[name] = struct{}{}
	return true
}

// setModes replaces the merge configuration and marks dirty every service whose
// rule may have changed: all of them when the default did.
func (m *merger) setModes(mc MergeConfig) (changed bool) {
	old, p := m.modes, mc.compile(m.names)
	m.mergeCfg, m.modes = mc, p
	if !sameRule(old.def, p.def) {
		for _, state := range m.bySource {
			for name := range state {
				m.dirty[name] = struct{}{}
				changed = true
			}
		}
		return changed
	}
	for name, r := range p.rules {
		if o, ok := old.rules[name]; !ok || !sameRule(o, r) {
			m.dirty[name] = struct{}{}
			changed = true
		}
	}
	for name := range old.rules {
		if _, ok := p.rules[name]; !ok {
			m.dirty[name] = struct{}{}
			changed = true
		}
	}
	return changed
}

func sameRule(a, b mergeRule) bool { return a.mode == b.mode && slices.Equal(a.weights, b.weights) }

// updateShadows records, for every source, whether its endpoints of name
// are left out of the merged state, and returns the sources for which this
// just began.
func (m *merger) updateShadows(name string, newly map[int][]string) {
	for i, state := range m.bySource {
		s, has := state[name]
		now := has && len(s.Endpoints) > 0 && !m.served[i]
		_, was := m.shadowed[i][name]
		if now == was {
			continue
		}
		if now {
			m.shadowed[i][name] = struct{}{}
			newly[i] = append(newly[i], name)
		} else {
			delete(m.shadowed[i], name)
		}
		if m.views[i] != nil {
			m.views[i].setShadowed(name, now)
		}
	}
}

// logShadows logs once per flush and source the services that just became
// shadowed, naming a few of them.
func (m *merger) logShadows(newly map[int][]string) {
	for i, names := range newly {
		slices.Sort(names)
		m.log.Info("services of this source are shadowed by the merge and not served",
			"source", m.names[i], "count", len(names), "services", names[:min(len(names), 5)],
			"shadowed_total", len(m.shadowed[i]))
	}
}

// flush returns the difference between the merged state and what was last
// published, by content, and records it as published.
func (m *merger) flush() Changes {
	var c Changes
	newly := map[int][]string{}
	for n := range m.dirty {
		win, ok := m.resolve(n)
		m.updateShadows(n, newly)
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
	m.published = reclaim.Map(m.published, &m.pubPeak)
	m.logShadows(newly)
	slices.SortFunc(c.Upserted, func(a, b sources.Service) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(c.Removed)
	return c
}

// follow gives the merger's per-source merge state to the sources of a
// reconfiguration (see merger.reorder, which moves their services and marks
// every name dirty): entry j is named[j], formerly source from[j] (-1 for a
// new source). The merge modes are compiled again, since its weights are indexed
// by source.
func (m *merger) follow(named []Named, from []int) {
	shadowed := m.shadowed
	m.names = make([]string, len(named))
	m.views = make([]*statusView, len(named))
	m.shadowed = make([]map[string]struct{}, len(named))
	m.served = make([]bool, len(named))
	for j, n := range named {
		m.names[j], m.views[j], m.shadowed[j] = n.Name, n.view, map[string]struct{}{}
		if from[j] >= 0 {
			m.shadowed[j] = shadowed[from[j]]
		}
	}
	m.modes = m.mergeCfg.compile(m.names)
}

// reorder rebuilds the per-source state for a new list of sources: entry j
// takes the state of old source from[j], or starts empty (and unsynced)
// when from[j] is -1. Every name an old source held may now resolve to
// another winner (or to none), so each is marked dirty; the next flush
// publishes only those whose merged content really changed.
func (m *merger) reorder(from []int) (changed bool) {
	old, oldSynced, oldPeaks := m.bySource, m.synced, m.peaks
	m.bySource = make([]map[string]sources.Service, len(from))
	m.synced = make([]bool, len(from))
	m.peaks = make([]int, len(from))
	for j, i := range from {
		if i < 0 {
			m.bySource[j] = map[string]sources.Service{}
			continue
		}
		m.bySource[j], m.synced[j], m.peaks[j] = old[i], oldSynced[i], oldPeaks[i]
	}
	for _, state := range old {
		for name := range state {
			m.dirty[name] = struct{}{}
			changed = true
		}
	}
	return changed
}
