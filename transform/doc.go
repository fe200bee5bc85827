// Package transform holds the second kind of plugin beside sources:
// transforms, pure functions that rewrite the merged model between the
// source manager and translation. They are configured as an ordered list,
//
//	transforms:
//	  - type: exclude                # drop what matches
//	    tags: [canary]
//	  - name: legacy-names           # recorded in /debug/why
//	    type: rename
//	    sources: [legacy-dns]
//	    template: "{{.Name}}-legacy"
//
// and run in that order on every service the manager publishes. Each entry
// has a type (registered by name, like source types), an optional name
// recorded in the provenance of the endpoints it changes (/debug/why), and
// the type's own keys. The built-in types live in transform/builtin and are
// linked in by the plugins package.
//
// # Writing a transform
//
// A transform type is a constructor registered from init():
//
//	package portfilter
//
//	import (
//		"github.com/xdsbridge/xdsbridge/settings"
//		"github.com/xdsbridge/xdsbridge/sources"
//		"github.com/xdsbridge/xdsbridge/transform"
//	)
//
//	// dropPort drops the endpoints listening on one port.
//	type dropPort struct{ port uint32 }
//
//	func (d dropPort) Service(svc sources.Service) (sources.Service, bool) {
//		keep := func(e sources.Endpoint) bool { return e.Port != d.port }
//		return transform.Filter(svc, keep), true
//	}
//
//	func init() {
//		transform.Register(transform.Type{
//			Name: "drop_port",
//			New: func(cfg map[string]any, _ transform.Options) (transform.Transform, error) {
//				var c struct {
//					Port uint32 `mapstructure:"port"`
//				}
//				if err := settings.Decode(cfg, &c); err != nil {
//					return nil, err
//				}
//				if c.Port == 0 {
//					return nil, settings.Errorf("port", "is required")
//				}
//				return dropPort{c.Port}, nil
//			},
//		})
//	}
//
// and a file in plugins/ that imports the package for its side effect
// (under a `no_<name>` build tag, like the built-ins). The contract:
//
//   - New decodes and validates its keys with settings.Decode (unknown keys
//     are errors) and returns *settings.KeyError values naming the key; it
//     does no I/O, because `bridge validate` calls it.
//   - Service is pure and deterministic: no I/O, clocks or randomness, and
//     no map order in its output. It must not modify svc, whose memory the
//     manager still owns: it returns svc itself when nothing changes, or a
//     copy (Filter, Each, or svc.Clone()) that it may change freely.
//   - Returning false drops the service; a changed Name renames it (two
//     services renamed to one name: the one serving it keeps it, the other
//     is blocked until it is free; see Stream).
//   - A transform that changes an endpoint records its own name there with
//     Touch (Each does it), so that /debug/why can say what happened.
//   - Endpoints must stay servable (sources.Endpoint.Validate): a transform
//     that cannot produce a valid endpoint leaves it unchanged.
package transform
