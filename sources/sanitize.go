package sources

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// MaxEndpointsPerService bounds the endpoints of one service, whatever the
// source: a registry gone wrong must not make the bridge build (and every
// client receive) assignments of unbounded size. The endpoints beyond it,
// in canonical order, are dropped and counted.
const MaxEndpointsPerService = 10000

// CheckUpstream reports why addr cannot be an upstream address: the
// unspecified addresses (0.0.0.0, ::), which mean "this host" only to a
// listener; multicast and the limited broadcast address, which no TCP
// connection reaches; and zone-scoped IPv6 (fe80::1%eth0), whose zone
// names an interface of the registry's host, not of the client's.
func CheckUpstream(addr netip.Addr) error {
	switch {
	case !addr.IsValid():
		return errors.New("not an IP address")
	case addr.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address", addr)
	case addr.IsMulticast():
		return fmt.Errorf("%s is a multicast address", addr)
	case addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is the broadcast address", addr)
	case addr.Zone() != "":
		return fmt.Errorf("%s is scoped to an interface of the registry's host", addr)
	}
	return nil
}

// sanitizer drops, for one source, the endpoints that cannot be served
// (Endpoint.Validate) and those beyond MaxEndpointsPerService, and counts
// each dropped endpoint once per change of its service rather than once
// per read: a source that re-reads the same bad record every few seconds
// does not make the counter climb.
type sanitizer struct {
	status *Status
	// dropped holds, per service that has some, what was dropped from its
	// last version.
	dropped map[string][]Endpoint
}

// clean filters the services of u in place (copying a service's endpoints
// before it changes them) and returns how many endpoints it newly dropped.
func (s *sanitizer) clean(u *Update) (newly int) {
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
		var bad []Endpoint
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
			slices.SortFunc(kept, Endpoint.Compare)
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
func (s *sanitizer) record(name string, bad []Endpoint) int {
	prev := s.dropped[name]
	if len(bad) == 0 {
		delete(s.dropped, name)
		return 0
	}
	if s.dropped == nil {
		s.dropped = map[string][]Endpoint{}
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
