package builtin

import (
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// override sets the weight and/or priority of matching endpoints.
type override struct {
	name             string
	sel              sources.Selector
	weight, priority *uint32
}

func (o override) differs(e sources.Endpoint) bool {
	return (o.weight != nil && e.Weight != *o.weight) || (o.priority != nil && e.Priority != *o.priority)
}

func (o override) Service(svc sources.Service) (sources.Service, bool) {
	if !o.sel.MatchName(svc) {
		return svc, true
	}
	match := func(e sources.Endpoint) bool { return o.sel.MatchEndpoint(e) && o.differs(e) }
	return transform.Each(svc, o.name, match, func(e *sources.Endpoint) {
		if o.weight != nil {
			e.Weight = *o.weight
		}
		if o.priority != nil {
			e.Priority = *o.priority
		}
	}), true
}

// maxWeight keeps a service's weights summable in Envoy's uint32 total
// with room for thousands of endpoints.
const maxWeight = 1 << 20

func init() {
	register("override", func(cfg map[string]any, opts transform.Options) (transform.Transform, error) {
		var c struct {
			selected `mapstructure:",squash"`
			Weight   *uint32 `mapstructure:"weight"`
			Priority *uint32 `mapstructure:"priority"`
		}
		if err := decode(cfg, &c, &c.Selector); err != nil {
			return nil, err
		}
		switch {
		case c.Weight == nil && c.Priority == nil:
			return nil, settings.Errorf("weight", "set weight, priority or both")
		case c.Weight != nil && (*c.Weight == 0 || *c.Weight > maxWeight):
			return nil, settings.Errorf("weight", "%d is outside 1..%d", *c.Weight, maxWeight)
		case c.Priority != nil && *c.Priority > 127:
			return nil, settings.Errorf("priority", "%d is outside 0..127", *c.Priority)
		}
		return override{name: opts.Name, sel: c.Selector, weight: c.Weight, priority: c.Priority}, nil
	})
}
