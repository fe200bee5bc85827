package manager

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// merger holds what every source reported, what was last published, and
// the names that may differ between the two. It is not safe for concurrent
// use: the manager's loop owns it.
//
// Its costs follow the size of an update, never the number of services: an
// update marks the names it touched as dirty, and a flush looks only at the
// dirty names, resolving each over the (few) sources by the service's merge
// mode (see mergepolicy.go).
type merger struct {
	bySource  []map[string]sources.Service // index = precedence, 0 wins
	synced    []bool
	nsynced   int
	published map[string]sources.Service
	dirty     map[string]struct{}

	mergeCfg MergeConfig // what policy was compiled from, against names
	policy   mergePolicy
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

func newMerger(n int) *merger {
	m := &merger{
		bySource:  make([]map[string]sources.Service, n),
		synced:    make([]bool, n),
		published: map[string]sources.Service{},
		dirty:     map[string]struct{}{},
		names:     make([]string, n),
		views:     make([]*statusView, n),
		shadowed:  make([]map[string]struct{}, n),
		served:    make([]bool, n),
		log:       slog.New(slog.DiscardHandler),
	}
	for i := range m.bySource {
		m.bySource[i] = map[string]sources.Service{}
		m.shadowed[i] = map[string]struct{}{}
		m.names[i] = fmt.Sprintf("source%d", i)
	}
	return m
}

func (m *merger) allSynced() bool { return m.nsynced == len(m.synced) }

// apply records update u of source src and reports whether it may change
// the merged state. The update's services are kept as they are (the Update
// contract hands them over), sorted in place.
func (m *merger) apply(src int, u sources.Update) (changed bool) {
	note := m.note
	if !m.synced[src] {
		m.synced[src] = true
		m.nsynced++
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

// setPolicy replaces the merge policy and marks dirty every service whose
// rule may have changed: all of them when the default did.
func (m *merger) setPolicy(mc MergeConfig) (changed bool) {
	old, p := m.policy, mc.compile(m.names)
	m.mergeCfg, m.policy = mc, p
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

// resolve returns the merged version of name under its merge mode, and
// records in m.served which sources it serves.
func (m *merger) resolve(name string) (sources.Service, bool) {
	clear(m.served)
	switch r := m.policy.rule(name); r.mode {
	case modeUnion:
		return m.union(name)
	case modeWeighted:
		return m.weighted(name, r.weights)
	default:
		return m.first(name)
	}
}

// first returns the version of the first source reporting name with
// endpoints, else the first version at all: an empty or unsynced source
// does not shadow one that has endpoints.
func (m *merger) first(name string) (sources.Service, bool) {
	win, at := sources.Service{}, -1
	for i, state := range m.bySource {
		s, ok := state[name]
		if !ok || (at >= 0 && len(s.Endpoints) == 0) {
			continue
		}
		if at >= 0 {
			m.served[at] = false
		}
		win, at = s, i
		m.served[i] = true
		if len(s.Endpoints) > 0 {
			break
		}
	}
	return win, at >= 0
}

// union returns the endpoints of every version of name in one service; an
// address:port reported twice keeps the copy of higher precedence.
func (m *merger) union(name string) (sources.Service, bool) {
	var out sources.Service
	n, first := 0, ""
	for i, state := range m.bySource {
		if s, ok := state[name]; ok {
			m.served[i] = true
			n, out = n+1, s
			first = cmp.Or(first, s.Source)
		}
	}
	if n <= 1 {
		return out, n == 1 // one version: served as it is, without a copy
	}
	out = sources.Service{Name: name, Source: first, Endpoints: []sources.Endpoint{}}
	seen := map[addrPort]struct{}{}
	for _, state := range m.bySource {
		for _, e := range state[name].Endpoints {
			k := addrPort{e.Address, e.Port}
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				out.Endpoints = append(out.Endpoints, e)
			}
		}
	}
	out.Sort()
	return out, true
}

type addrPort struct {
	addr string
	port uint32
}

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
	m.logShadows(newly)
	slices.SortFunc(c.Upserted, func(a, b sources.Service) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(c.Removed)
	return c
}
