// Package builtin holds the built-in transform types. Every type takes the
// selector keys of sources.Selector (services: name globs, sources: source
// names, tags, metadata), which limit what it applies to:
//
//	transforms:
//	- type: include        # serve only matching services; with tags/metadata,
//	  services: [web, api*] #   only the matching endpoints of those services
//	- type: exclude        # drop matching services; with tags/metadata, drop
//	  tags: [canary]        #   just the matching endpoints
//	- type: rename         # cluster-name template over .Name and .Source
//	  sources: [legacy-dns]
//	  template: "{{.Name}}-legacy"
//	- type: metadata       # metadata mapping, e.g. a tag to an envoy.lb subset key
//	  set:
//	    - {tag: canary, key: stage, value: canary}   # value default "true"
//	    - {from: version, key: subset_version}        # copy a metadata key
//	- type: override       # weight and/or priority of matching endpoints
//	  tags: [small]
//	  weight: 1
//	  priority: 1
//	- type: locality       # templates over .Name, .Source, .Meta, .Locality;
//	  zone: "{{.Meta.az}}"  #   an empty result leaves the field as it was
//
// Services left with no endpoints are served as empty clusters, like a
// registry's authoritative "none".
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
