package manager

import (
	"slices"
)

// maxShadowedNames bounds the names a status snapshot lists, so that
// /sources stays small when thousands of services are shadowed; the count
// is always complete.
const maxShadowedNames = 20

// setShadowed records whether the merge leaves out this source's endpoints
// of service name (see MergeFirst and MergeWeighted).
func (v *statusView) setShadowed(name string, on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !on {
		delete(v.shadowed, name)
		return
	}
	if v.shadowed == nil {
		v.shadowed = map[string]struct{}{}
	}
	v.shadowed[name] = struct{}{}
}

// shadowedNames returns the first maxShadowedNames shadowed services in
// name order, in one pass over the set. The caller holds v.mu.
func (v *statusView) shadowedNames() []string {
	if len(v.shadowed) == 0 {
		return nil
	}
	names := make([]string, 0, maxShadowedNames+1)
	for n := range v.shadowed {
		i, _ := slices.BinarySearch(names, n)
		if i < maxShadowedNames {
			names = slices.Insert(names, i, n)
			names = names[:min(len(names), maxShadowedNames)]
		}
	}
	return names
}
