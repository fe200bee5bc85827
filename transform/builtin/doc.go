// Package builtin holds the built-in transform types, each a pure
// function of one service: include and exclude (whole services, or with
// tags or metadata only the matching endpoints), rename (a cluster-name
// template), metadata (endpoint metadata set from tags or copied from
// other keys, such as a subset key under envoy.lb), override (weight and
// priority) and locality (region, zone and sub-zone from templates).
// docs/shaping.md, "Transforms", has their keys.
//
// Every type takes the selector keys of sources.Selector (services: name
// globs, sources: source names, tags, metadata), which limit what it
// applies to, so that a type never needs a selector of its own. Services
// left with no endpoints are served as empty clusters, like a registry's
// authoritative "none": filtering endpoints never removes a cluster that a
// client's routes may name.
package builtin

import (
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// selected are the selector keys every built-in type takes.
type selected struct {
	sources.Selector `mapstructure:",squash"`
}

// decode decodes cfg into out (a struct embedding selected) and validates
// the selector sel points into.
func decode(cfg map[string]any, out any, sel *sources.Selector) error {
	if err := settings.Decode(cfg, out); err != nil {
		return err
	}
	return sel.Validate()
}

// register registers a type whose constructor is build.
func register(name string, build func(cfg map[string]any, opts transform.Options) (transform.Transform, error)) {
	transform.Register(transform.Type{Name: name, New: build})
}
