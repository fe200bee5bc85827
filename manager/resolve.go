package manager

import (
	"cmp"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// resolve returns the merged version of name under its merge mode, and
// records in m.served which sources it serves.
func (m *merger) resolve(name string) (sources.Service, bool) {
	clear(m.served)
	switch r := m.modes.rule(name); r.mode {
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

// weightScale multiplies the source weights (at most MaxMergeWeight) into
// locality weights, so that a source whose endpoints span several
// localities can split its share among them in proportion to their
// endpoint weights with little rounding.
const weightScale = 1000

// weighted returns the weighted merge of name: the endpoints of every
// source with a positive weight, each moved into a locality of its own
// (see sourceLocality), and the weight of every such locality, so that at
// each priority source s receives weights[s] / (sum of the weights of the
// sources with endpoints at that priority) of the traffic, split among its
// localities by their endpoints' weights. An address:port reported by
// several sources is served once, by the source of highest precedence.
//
// The service exists while any source reports it; a source not listed
// (weight 0) contributes no endpoints.
func (m *merger) weighted(name string, weights []uint32) (sources.Service, bool) {
	out := sources.Service{Name: name, Endpoints: []sources.Endpoint{}, Localities: []sources.LocalityWeight{}}
	found := false
	type group struct {
		src int
		sum uint64
	}
	type srcPriority struct {
		src      int
		priority uint32
	}
	groups := map[sources.LocalityWeight]*group{} // keyed with Weight 0
	totals := map[srcPriority]uint64{}
	seen := map[addrPort]struct{}{}
	for i, state := range m.bySource {
		s, ok := state[name]
		if !ok {
			continue
		}
		found = true
		if i >= len(weights) || weights[i] == 0 {
			continue
		}
		m.served[i] = true
		out.Source = cmp.Or(out.Source, s.Source)
		for _, e := range s.Endpoints {
			k := addrPort{e.Address, e.Port}
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
			e.Locality = sourceLocality(e.Locality, m.names[i])
			out.Endpoints = append(out.Endpoints, e)
			w := uint64(max(e.Weight, 1))
			gk := sources.LocalityWeight{Priority: e.Priority, Locality: e.Locality}
			g := groups[gk]
			if g == nil {
				g = &group{src: i}
				groups[gk] = g
			}
			g.sum += w
			totals[srcPriority{i, e.Priority}] += w
		}
	}
	if !found {
		return sources.Service{}, false
	}
	for gk, g := range groups {
		total := totals[srcPriority{g.src, gk.Priority}]
		gk.Weight = uint32(max(1, uint64(weights[g.src])*weightScale*g.sum/total))
		out.Localities = append(out.Localities, gk)
	}
	slices.SortFunc(out.Localities, func(a, b sources.LocalityWeight) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.Locality.Compare(b.Locality))
	})
	out.Sort()
	return out, true
}

// sourceLocality returns l made unique to the source called src: its
// sub-zone becomes the source's name, followed by a slash and the original
// sub-zone when there was one. Region and zone stay, so that a locality
// still reads as the place it is. Two sources' endpoints must never share a
// locality: Envoy and gRPC weigh localities, not sources.
func sourceLocality(l sources.Locality, src string) sources.Locality {
	if l.SubZone == "" {
		l.SubZone = src
	} else {
		l.SubZone = src + "/" + l.SubZone
	}
	return l
}
