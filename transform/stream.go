package transform

import (
	"cmp"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Stream applies a Chain to the manager's successive Changes. It remembers
// which name each service is published under, because a transform may drop
// or rename a service: the removal of a service, or its move to another
// name, must remove what was published before.
//
// Two services renamed to one name conflict: the one already publishing it
// keeps it and the other is held back (reported in Conflicts) until the
// name is free again at a later change of it. Not safe for concurrent use.
type Stream struct {
	chain *Chain
	out   map[string]string // input name -> published name
	owner map[string]string // published name -> input name
	// Conflicts are the input names held back by the latest Apply.
	Conflicts []string
}

// NewStream returns a stream of chain (nil: no transforms).
func NewStream(chain *Chain) *Stream {
	return &Stream{chain: chain, out: map[string]string{}, owner: map[string]string{}}
}

// Apply transforms c and returns what to publish: the transformed upserts
// and the published names to remove. c is not modified; its services are
// shared with the result where no transform changed them.
func (s *Stream) Apply(c sources.Changes) sources.Changes {
	if s.chain.Len() == 0 {
		return c
	}
	s.Conflicts = nil
	var res sources.Changes
	removed := map[string]bool{}
	unpublish := func(in string) {
		if name, ok := s.out[in]; ok {
			delete(s.out, in)
			delete(s.owner, name)
			removed[name] = true
		}
	}
	for _, in := range c.Removed {
		unpublish(in)
	}
	for _, svc := range c.Upserted {
		t, ok := s.chain.Service(svc)
		if name, had := s.out[svc.Name]; had && (!ok || t.Name != name) {
			unpublish(svc.Name)
		}
		if !ok {
			continue
		}
		if o, taken := s.owner[t.Name]; taken && o != svc.Name {
			s.Conflicts = append(s.Conflicts, svc.Name)
			continue
		}
		s.out[svc.Name], s.owner[t.Name] = t.Name, svc.Name
		delete(removed, t.Name)
		res.Upserted = append(res.Upserted, t)
	}
	for name := range removed {
		res.Removed = append(res.Removed, name)
	}
	slices.Sort(res.Removed)
	slices.SortFunc(res.Upserted, func(a, b sources.Service) int { return cmp.Compare(a.Name, b.Name) })
	return res
}
