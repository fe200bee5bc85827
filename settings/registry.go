package settings

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Registry holds plugins of one kind (source types, transform types) by
// name. It is safe for concurrent use; plugins register from init().
type Registry[T any] struct {
	mu        sync.RWMutex
	m         map[string]T
	pkg, what string
}

// NewRegistry returns an empty registry; pkg and what name the package and
// the kind of plugin in panic messages ("sources: type %q registered twice").
func NewRegistry[T any](pkg, what string) *Registry[T] {
	return &Registry[T]{m: map[string]T{}, pkg: pkg, what: what}
}

// Register adds v under name; an empty or duplicate name is a programming
// error and panics.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" {
		panic(fmt.Sprintf("%s: Register needs a name", r.pkg))
	}
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("%s: %s %q registered twice", r.pkg, r.what, name))
	}
	r.m[name] = v
}

// Lookup returns what is registered under name.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}
