package sources

import "slices"

// maxShadowedNames bounds the names a status snapshot lists, so that
// /sources stays small when thousands of services are shadowed; the count
// is always complete.
const maxShadowedNames = 20

// setShadowed records whether the merge leaves out this source's endpoints
// of service name (see MergeFirst and MergeWeighted).
func (s *Status) setShadowed(name string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !on {
		delete(s.shadowed, name)
		return
	}
	if s.shadowed == nil {
		s.shadowed = map[string]struct{}{}
	}
	s.shadowed[name] = struct{}{}
}

// shadowedNames returns the first maxShadowedNames shadowed services in
// name order, in one pass over the set. The caller holds s.mu.
func (s *Status) shadowedNames() []string {
	if len(s.shadowed) == 0 {
		return nil
	}
	names := make([]string, 0, maxShadowedNames+1)
	for n := range s.shadowed {
		i, _ := slices.BinarySearch(names, n)
		if i < maxShadowedNames {
			names = slices.Insert(names, i, n)
			names = names[:min(len(names), maxShadowedNames)]
		}
	}
	return names
}
