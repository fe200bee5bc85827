package manager

import (
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// MaxEndpointsPerService bounds the endpoints of one service, whatever the
// source: a registry gone wrong must not make the bridge build (and every
// client receive) assignments of unbounded size. The endpoints beyond it,
// in canonical order, are dropped and counted.
const MaxEndpointsPerService = 10000

// sanitizer drops, for one source, the endpoints that cannot be served
// (Endpoint.Validate) and those beyond MaxEndpointsPerService, and counts
// each dropped endpoint once per change of its service rather than once
// per read: a source that re-reads the same bad record every few seconds
// does not make the counter climb.
type sanitizer struct {
	status *sources.Status
	// dropped holds, per service that has some, what was dropped from its
	// last version.
	dropped map[string][]sources.Endpoint
}

// clean filters the services of u in place (copying a service's endpoints
// before it changes them) and returns how many endpoints it newly dropped.
func (s *sanitizer) clean(u *sources.Update) (newly int) {
	if u.Full {
		keep := make(map[string]bool, len(u.Services))
		for _, svc := range u.Services {
			keep[svc.Name] = true
		}
		for name := range s.dropped {
			if !keep[name] {
				delete(s.dropped, name)
			}
		}
	}
	for _, name := range u.Removed {
		delete(s.dropped, name)
	}
	for i := range u.Services {
		svc := &u.Services[i]
		var bad []sources.Endpoint
		kept := svc.Endpoints
		for k, e := range svc.Endpoints {
			if e.Validate() == nil {
				if bad != nil {
					kept = append(kept, e)
				}
				continue
			}
			if bad == nil {
				kept = slices.Clone(svc.Endpoints[:k])
			}
			bad = append(bad, e)
		}
		if len(kept) > MaxEndpointsPerService {
			kept = slices.Clone(kept)
			slices.SortFunc(kept, sources.Endpoint.Compare)
			bad = append(bad, kept[MaxEndpointsPerService:]...)
			kept = kept[:MaxEndpointsPerService:MaxEndpointsPerService]
		}
		svc.Endpoints = kept
		newly += s.record(svc.Name, bad)
	}
	if newly > 0 && s.status != nil {
		s.status.Dropped(newly)
	}
	return newly
}

// record notes what was dropped from the new version of name and returns
// how many of those were not dropped from its previous version already.
func (s *sanitizer) record(name string, bad []sources.Endpoint) int {
	prev := s.dropped[name]
	if len(bad) == 0 {
		delete(s.dropped, name)
		return 0
	}
	if s.dropped == nil {
		s.dropped = map[string][]sources.Endpoint{}
	}
	s.dropped[name] = bad
	n := 0
	for _, e := range bad {
		if !slices.ContainsFunc(prev, e.Equal) {
			n++
		}
	}
	return n
}
