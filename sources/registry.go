package sources

import "github.com/xdsbridge/xdsbridge/settings"

// Type is a kind of source (file, dns, consul, ...), registered by name.
type Type struct {
	// Name is the value of the `type` key that selects this kind.
	Name string
	// New decodes cfg (the keys of one `sources` entry other than name and
	// type), validates it and returns a Source ready to Run. It must do no
	// I/O, so that `bridge validate` can call it safely. Configuration
	// errors should be *settings.KeyError values (settings.Decode returns
	// them), with keys relative to the entry; the caller adds the entry's
	// own prefix.
	New func(cfg map[string]any, opts Options) (Source, error)
}

var registry = settings.NewRegistry[Type]("sources", "type")

// Register makes a source type available to configurations. It is called
// from init(); registering a name twice is a programming error and panics.
func Register(t Type) {
	if t.New == nil {
		panic("sources: Register needs a constructor")
	}
	registry.Register(t.Name, t)
}

// Lookup returns the registered type of that name.
func Lookup(name string) (Type, bool) { return registry.Lookup(name) }

// Types returns the registered type names, sorted.
func Types() []string { return registry.Names() }
