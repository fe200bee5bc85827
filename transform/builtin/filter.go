package builtin

import (
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// filter is include (keep what matches) or exclude (drop what matches).
type filter struct {
	sel     sources.Selector
	include bool
}

func (f filter) Service(svc sources.Service) (sources.Service, bool) {
	named := f.sel.MatchName(svc)
	if !f.sel.ByEndpoint() || !named {
		// Whole services: include keeps the named ones, exclude drops them.
		return svc, named == f.include
	}
	return transform.Filter(svc, func(e sources.Endpoint) bool { return f.sel.MatchEndpoint(e) == f.include }), true
}

func init() {
	for _, include := range []bool{true, false} {
		name := map[bool]string{true: "include", false: "exclude"}[include]
		register(name, func(cfg map[string]any, _ transform.Options) (transform.Transform, error) {
			var c selected
			if err := decode(cfg, &c, &c.Selector); err != nil {
				return nil, err
			}
			return filter{sel: c.Selector, include: include}, nil
		})
	}
}
