package envoysim

import "sync"

// Interner keeps one copy of each string that many clients hold: resource
// names and versions, which every client of a fleet receives alike. A
// fleet of thousands of Light clients sharing one (Options.Intern) keeps
// each name and version once instead of once per client. It grows with
// the distinct strings seen (the names of the world and the versions of
// its changes) and lives as long as the fleet. Safe for concurrent use.
type Interner struct {
	mu sync.RWMutex
	m  map[string]string
}

// NewInterner returns an empty Interner.
func NewInterner() *Interner { return &Interner{m: map[string]string{}} }

// bytes returns the shared copy of string(b), allocating only the first
// time it is seen. A nil Interner copies.
func (in *Interner) bytes(b []byte) string {
	if in == nil {
		return string(b)
	}
	in.mu.RLock()
	s, ok := in.m[string(b)]
	in.mu.RUnlock()
	if ok {
		return s
	}
	return in.add(string(b))
}

// string returns the shared copy of s. A nil Interner returns s.
func (in *Interner) string(s string) string {
	if in == nil {
		return s
	}
	in.mu.RLock()
	v, ok := in.m[s]
	in.mu.RUnlock()
	if ok {
		return v
	}
	return in.add(s)
}

func (in *Interner) add(s string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	in.m[s] = s
	return s
}
