package sources

import (
	"fmt"
	"slices"
	"sync"
)

// Type is a kind of source (file, dns, consul, ...), registered by name.
type Type struct {
	// Name is the value of the `type` key that selects this kind.
	Name string
	// New decodes cfg (the keys of one `sources` entry other than name and
	// type), validates it and returns a Source ready to Run. It must do no
	// I/O, so that `bridge validate` can call it safely. Configuration
	// errors should be *KeyError values (see Decode), with keys relative to
	// the entry; the caller adds the entry's own prefix.
	New func(cfg map[string]any, opts Options) (Source, error)
}

var registry = struct {
	sync.RWMutex
	types map[string]Type
}{types: map[string]Type{}}

// Register makes a source type available to configurations. It is called
// from init(); registering a name twice is a programming error and panics.
func Register(t Type) {
	registry.Lock()
	defer registry.Unlock()
	if t.Name == "" || t.New == nil {
		panic("sources: Register needs a name and a constructor")
	}
	if _, dup := registry.types[t.Name]; dup {
		panic(fmt.Sprintf("sources: type %q registered twice", t.Name))
	}
	registry.types[t.Name] = t
}

// Lookup returns the registered type of that name.
func Lookup(name string) (Type, bool) {
	registry.RLock()
	defer registry.RUnlock()
	t, ok := registry.types[name]
	return t, ok
}

// Types returns the registered type names, sorted.
func Types() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.types))
	for n := range registry.types {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
