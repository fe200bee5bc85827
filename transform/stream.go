package transform

import (
	"cmp"
	"maps"
	"slices"

	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Stream applies a Chain to the manager's successive Changes. It remembers
// which name each service is published under, because a transform may drop
// or rename a service: the removal of a service, or its move to another
// name, must remove what was published before.
//
// Two services renamed to one name conflict: the one already publishing it
// keeps it and the other is blocked (listed in Conflicts) until the name
// is free, when it is published without waiting for a change of its own.
// Blocked services are kept (transformed) until then; there are at most
// as many as services. Not safe for concurrent use.
type Stream struct {
	chain   *Chain
	out     map[string]string          // input name -> published name
	owner   map[string]string          // published name -> input name
	blocked map[string]sources.Service // input name -> its transformed version, blocked by a conflict
	// peaks are the most entries out and owner had (reclaim.Map).
	outPeak, ownerPeak int
	// Conflicts are the input names blocked after the latest Apply.
	Conflicts []string
}

// NewStream returns a stream of chain (nil: no transforms).
func NewStream(chain *Chain) *Stream {
	return &Stream{chain: chain, out: map[string]string{}, owner: map[string]string{}, blocked: map[string]sources.Service{}}
}

// Apply transforms c and returns what to publish: the transformed upserts
// and the published names to remove. c is not modified; its services are
// shared with the result where no transform changed them.
func (s *Stream) Apply(c manager.Changes) manager.Changes {
	if s.chain.Len() == 0 {
		return c
	}
	up := map[string]sources.Service{} // published name -> service
	removed := map[string]bool{}
	unpublish := func(in string) {
		delete(s.blocked, in)
		if name, ok := s.out[in]; ok {
			delete(s.out, in)
			delete(s.owner, name)
			delete(up, name)
			removed[name] = true
		}
	}
	publish := func(in string, t sources.Service) {
		if o, taken := s.owner[t.Name]; taken && o != in {
			s.blocked[in] = t
			return
		}
		delete(s.blocked, in)
		s.out[in], s.owner[t.Name] = t.Name, in
		delete(removed, t.Name)
		up[t.Name] = t
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
			delete(s.blocked, svc.Name)
			continue
		}
		publish(svc.Name, t)
	}
	// Names freed above go to the services waiting for them, in name order.
	for _, in := range slices.Sorted(maps.Keys(s.blocked)) {
		if t := s.blocked[in]; removed[t.Name] {
			publish(in, t)
		}
	}
	s.out, s.owner = reclaim.Map(s.out, &s.outPeak), reclaim.Map(s.owner, &s.ownerPeak)
	s.Conflicts = slices.Sorted(maps.Keys(s.blocked))
	res := manager.Changes{
		Upserted: slices.Collect(maps.Values(up)),
		Removed:  slices.Sorted(maps.Keys(removed)),
	}
	slices.SortFunc(res.Upserted, func(a, b sources.Service) int { return cmp.Compare(a.Name, b.Name) })
	return res
}
