package transform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Transform rewrites one service; see the package documentation for its
// contract.
type Transform interface {
	Service(svc sources.Service) (sources.Service, bool)
}

// Options are what every transform constructor receives besides its keys.
type Options struct {
	// Name is the entry's name, which the transform records in the
	// endpoints it changes (see Touch).
	Name string
}

// Type is a kind of transform, registered by name.
type Type struct {
	// Name is the value of the `type` key that selects this kind.
	Name string
	// New decodes and validates cfg (the entry's keys other than name and
	// type), doing no I/O. Errors should be *settings.KeyError values with
	// keys relative to the entry.
	New func(cfg map[string]any, opts Options) (Transform, error)
}

var registry = settings.NewRegistry[Type]("transform", "type")

// Register makes a transform type available to configurations. It is
// called from init(); registering a name twice panics.
func Register(t Type) {
	if t.New == nil {
		panic("transform: Register needs a constructor")
	}
	registry.Register(t.Name, t)
}

// Types returns the registered type names, sorted.
func Types() []string { return registry.Names() }

// Entry is one item of the `transforms` list.
type Entry struct {
	Name, Type string
	Settings   map[string]any
	Index      int
}

// Key returns the configuration key of the entry, such as "transforms[1]".
func (e Entry) Key() string { return fmt.Sprintf("transforms[%d]", e.Index) }

// step is one built transform of a Chain.
type step struct {
	name string
	t    Transform
}

// Chain is the ordered list of configured transforms. It is immutable and
// safe for concurrent use; the nil Chain changes nothing.
type Chain struct {
	steps []step
}

// NewChain builds every entry with its type's constructor. Errors are
// *settings.KeyError values naming the entry's key.
func NewChain(entries []Entry) (*Chain, error) {
	c := &Chain{}
	for _, e := range entries {
		if e.Type == "" {
			return nil, settings.Errorf(e.Key()+".type", "is required")
		}
		t, ok := registry.Lookup(e.Type)
		if !ok {
			return nil, settings.Errorf(e.Key()+".type", "unknown transform type %q (known: %s)",
				e.Type, strings.Join(Types(), ", "))
		}
		name := e.Name
		if name == "" {
			name = e.Type
		}
		tr, err := t.New(e.Settings, Options{Name: name})
		if err != nil {
			return nil, settings.Prefix(e.Key(), err)
		}
		c.steps = append(c.steps, step{name: name, t: tr})
	}
	return c, nil
}

// Len returns the number of transforms.
func (c *Chain) Len() int {
	if c == nil {
		return 0
	}
	return len(c.steps)
}

// Service runs every transform on svc in order; false means a transform
// dropped it. svc is not modified.
func (c *Chain) Service(svc sources.Service) (sources.Service, bool) {
	if c == nil {
		return svc, true
	}
	for _, s := range c.steps {
		var ok bool
		if svc, ok = s.t.Service(svc); !ok {
			return sources.Service{}, false
		}
	}
	// Not sorted here: svc may still be the manager's own copy, and
	// translation does not depend on the order.
	return svc, true
}

// Touch records in e that the transform named name changed it.
func Touch(e *sources.Endpoint, name string) {
	e.Origin.Transforms = append(slices.Clip(e.Origin.Transforms), name)
}

// Filter returns svc with only the endpoints keep accepts: svc itself when
// it keeps them all, else a copy.
func Filter(svc sources.Service, keep func(sources.Endpoint) bool) sources.Service {
	if !slices.ContainsFunc(svc.Endpoints, func(e sources.Endpoint) bool { return !keep(e) }) {
		return svc
	}
	out := svc
	out.Endpoints = make([]sources.Endpoint, 0, len(svc.Endpoints))
	for _, e := range svc.Endpoints {
		if keep(e) {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out
}

// Each returns svc with change applied to every endpoint match accepts,
// each such endpoint touched by name (see Touch): svc itself when match
// accepts none, else a deep copy.
func Each(svc sources.Service, name string, match func(sources.Endpoint) bool, change func(*sources.Endpoint)) sources.Service {
	if !slices.ContainsFunc(svc.Endpoints, match) {
		return svc
	}
	out := svc.Clone()
	for i := range out.Endpoints {
		if e := &out.Endpoints[i]; match(*e) {
			change(e)
			Touch(e, name)
		}
	}
	return out
}
